"""Communication per mesh axis, on the Analysis protocol.

Each collective activity's process group comes from the trace (``events.groups``: PyTorch
``record_param_comms`` ranks, XLA replica groups / permute pairs); the activity's own id in
that numbering is its global rank when every rank has one device (PyTorch: one process per
GPU), else ``rank × devices per rank + device`` (XLA: a host's local devices after the
previous hosts'). Groups map to axes of the mesh (``--mesh`` or inferred,
:mod:`tracelens.analyze.communication.mesh`); per axis: activities, message bytes, time, exposed
time and
its share, busbw against the link the axis runs on (intra-node xGMI/NVLink from the hardware
table, inter-node only when the NIC peak is given). An activity without an axis is counted
under its reason, never given one.

The per-host part is the host's collective activities (exposure is per device, complete
within a host) and its devices; merge places them in the job; finish maps and sums.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import polars as pl

from tracelens.analyze.communication.balance import balance
from tracelens.analyze.communication.pipeline import pipeline, pipeline_rows
from tracelens.analyze.communication.collectives import bus_factor_expr, link_of, match_instances, \
    partial_activities
from tracelens.analyze.communication.mesh import (
    Group,
    Mesh,
    given_mesh,
    inferred_mesh,
    named,
    own_group,
    parse_groups,
    sdy_meshes,
)
from tracelens.core.model import Trace, TraceMeta, world_sizes
from tracelens.engine.protocol import JobPlan
from tracelens.results.axes import AxisTotals, Axes, InstanceAxis, MeshAxis, Unmapped
from tracelens.results.collectives import Busbw, Collectives
from tracelens.core.signatures import distinct_rows

NO_GROUP = "the trace gives no process group for it"
BAD_GROUP = "its process group could not be read"
NOT_MEMBER = "its device is not in its op's groups"
NOT_GRID = "its group is no sub-grid of the mesh"
OUTSIDE = "its group has ids outside the mesh"
NOT_INFERRED = ("the trace gives no process group for it, and holds {held} of the job's "
                "{world} ranks: the ranks that matched it need not be its group")
INFERRED = "inferred from the ranks that matched each instance (the trace records no group)"
# point-to-point: a matched "instance" of sends is no group
_P2P = ("send", "recv", "send-recv", "collective-permute")


class MeshMismatch(ValueError):
    """A --mesh whose devices are not the job's (the CLI turns it into a usage error)."""


@dataclass(frozen=True)
class AxesOptions:
    """``mesh``: the --mesh axes ((name, size), outermost first), empty to infer them;
    ``nic_gb_per_s``: the inter-node link's per-direction peak per GPU, when known;
    ``ranks_per_host``: where the trace names no hosts (Kineto), rank r is on host
    r // ranks_per_host (else whether a group crosses hosts stays unknown)."""

    mesh: tuple[tuple[str, int], ...] = ()
    nic_gb_per_s: float | None = None
    ranks_per_host: int | None = None
    mesh_source: str = "mesh"  # where ``mesh`` comes from: the --mesh option, or "hlo"
    # the job's world size as its trace records it (Kineto distributedInfo.world_size): where
    # the trace records no process group, an instance's group is then inferred
    world_size: int | None = None


@dataclass(frozen=True)
class AxesPart:
    """One host's (or the job's) collective activities and devices."""

    acts: pl.DataFrame
    devices: pl.DataFrame
    hosts: pl.DataFrame  # host, rank, named (False: the reader made the name up, Kineto rank<N>)
    alignment: str = ""  # how the job's hosts are aligned (merge: the plan's)
    pipe: pl.DataFrame | None = None  # pipeline.pipeline_rows (None: not computed)
    # the named meshes the host's HLO modules record (JAX Shardy ``xla.sdy.meshes``)
    meshes: tuple[tuple[tuple[str, int], ...], ...] = ()
    world_sizes: tuple[int, ...] = ()  # the world sizes its files record (distributedInfo)


class AxesAnalysis:
    """partial / merge / finish (``tracelens.engine.protocol``)."""

    def partial(self, trace: Trace, options: AxesOptions) -> AxesPart:
        named = {h: i.named for h, i in trace.meta.hosts.items()}
        hosts = pl.concat([trace.events.select("host", "rank"),
                           trace.devices.select("host", "rank")]).unique().sort(
            "host", "rank").with_columns(named=pl.col("host").replace_strict(
                named, default=True, return_dtype=pl.Boolean))
        acts = partial_activities(trace.events)
        meshes = tuple(dict.fromkeys(m for blob in trace.modules["hlo_proto"].to_list()
                                     for m in sdy_meshes(blob)))
        return AxesPart(acts, trace.devices, hosts, pipe=pipeline_rows(trace, acts),
                        meshes=meshes, world_sizes=world_sizes([trace.meta]))

    def merge(self, parts: Sequence[AxesPart], plan: JobPlan) -> AxesPart:
        return AxesPart(plan.concat([p.acts for p in parts]),
                        pl.concat([plan.place(p.devices, i) for i, p in enumerate(parts)]),
                        pl.concat([plan.place(p.hosts, i) for i, p in enumerate(parts)]),
                        plan.alignment, pl.concat([plan.place(p.pipe, i) for i, p in enumerate(
                            parts) if p.pipe is not None], how="vertical"),
                        tuple(dict.fromkeys(m for p in parts for m in p.meshes)),
                        tuple(sorted({w for p in parts for w in p.world_sizes})))

    def finish(self, part: AxesPart, options: AxesOptions) -> Axes:
        if not options.mesh and len(part.meshes) == 1:  # the one mesh the HLO names
            options = replace(options, mesh=part.meshes[0], mesh_source="hlo")
        options = with_world(options, part.world_sizes)
        return axes_of(part.acts, part.devices, part.hosts, options, part.alignment, part.pipe)


def with_world(options: AxesOptions, sizes: Sequence[int]) -> AxesOptions:
    """``options`` with the job's world size, when its files agree on one."""
    if options.world_size is None and len(sizes) == 1:
        return replace(options, world_size=sizes[0])
    return options


def with_inferred_groups(acts: pl.DataFrame, devices: pl.DataFrame, hosts: pl.DataFrame,
                         options: AxesOptions) -> pl.DataFrame:
    """``acts`` with ``groups`` filled where the trace records none: the ids of
    the ranks that matched the instance (all of them when all matched), where the job holds
    every rank of its recorded world size (``options.world_size``, two ranks or more: one
    rank's collectives are no group); ``group_size`` and busbw
    follow from that group. ``group_inferred`` marks those rows; ``group_why`` says why a
    row without a group stays without one (null: :data:`NO_GROUP`). Idempotent."""
    if "group_inferred" in acts.columns:
        return acts
    need = pl.col("groups").is_null() & ~pl.col("type").is_in(list(_P2P))
    out = acts.with_columns(group_inferred=pl.lit(False), group_why=pl.lit(None, pl.String))
    world = options.world_size
    if world is None or world < 2 or acts.is_empty() or "instance_key" not in acts.columns \
            or not acts.select(need.any()).item():
        return out
    me, keyed = member_ids(acts, devices, hosts, options.ranks_per_host)
    held = set(keyed["_me"].drop_nulls().to_list())
    if not set(range(world)) <= held:
        return out.with_columns(group_why=pl.when(need).then(pl.lit(NOT_INFERRED.format(
            held=len(held & set(range(world))), world=world))))
    inst = ["instance_key", "occurrence"]
    found = out.with_columns(_me=me).filter(need).group_by(inst).agg(
        _ids=pl.col("_me").unique().sort().cast(pl.String).str.join(","),
        _n=pl.col("_me").n_unique())
    out = out.join(found, on=inst, how="left", maintain_order="left", nulls_equal=True)
    got = need & pl.col("_ids").is_not_null()
    out = out.with_columns(
        group_inferred=got,
        groups=pl.when(got).then(pl.col("_ids").cast(acts.schema["groups"]))
        .otherwise(pl.col("groups")),
        group_size=pl.when(got & pl.col("group_size").is_null())
        .then(pl.col("_n").cast(acts.schema["group_size"])).otherwise(pl.col("group_size")),
    ).drop("_ids", "_n")
    if "busbw_gb_per_s" not in out.columns:
        return out
    # as collectives.collective_activities: algbw (GB/s) × the factor of the group's size
    algbw = pl.when(pl.col("dur_ns") > 0).then(
        pl.col("msg_bytes").cast(pl.Float64) / pl.col("dur_ns").cast(pl.Float64))
    return out.with_columns(busbw_gb_per_s=algbw * bus_factor_expr(pl.col("type"),
                                                                  pl.col("group_size")))


def member_ids(acts: pl.DataFrame, devices: pl.DataFrame, hosts: pl.DataFrame,
               ranks_per_host: int | None) -> tuple[pl.Expr, pl.DataFrame]:
    """The id expression of an activity in its groups' numbering (module doc), and the
    job's devices with their ids and the host each is on (null when the trace names no
    host, Kineto, and ``ranks_per_host`` is not given)."""
    keys = pl.concat([acts.select("host", "rank", "device"),
                      devices.select("host", "rank", "device")]).unique()
    per_rank = keys.group_by("rank").agg(pl.col("device").n_unique())["device"].max()
    width = int(keys["device"].max() or 0) + 1
    unnamed = pl.col("host").is_in(hosts.filter(~pl.col("named"))["host"].implode())
    # Kineto names an unnamed host rank<N> from distributedInfo's rank: the global rank
    global_rank = pl.col("host").cast(pl.String).str.extract(r"^rank(\d+)$", 1).cast(pl.Int64)
    me = (pl.when(unnamed & global_rank.is_not_null()).then(global_rank)
          .otherwise(pl.col("rank").cast(pl.Int64) if per_rank == 1 or per_rank is None
                     else pl.col("rank").cast(pl.Int64) * width + pl.col("device")))
    on_host = pl.when(~unnamed).then(pl.col("host"))
    if ranks_per_host:
        on_host = on_host.otherwise(pl.format("host{}", pl.col("_me") // ranks_per_host))
    return me, keys.with_columns(_me=me).with_columns(_on=on_host)


class _ById(dict[int, str | None]):
    """Hosts by id: the trace's where it names them, else ``host<id // ranks_per_host>``."""

    def __init__(self, ranks_per_host: int, known: dict[int, str | None]) -> None:
        super().__init__(known)
        self.per = ranks_per_host

    def get(self, key: int, default: str | None = None) -> str | None:  # type: ignore[override]
        found = super().get(key)
        return found if found is not None else f"host{key // self.per}"


def mapped(acts: pl.DataFrame, devices: pl.DataFrame, hosts: pl.DataFrame,
           options: AxesOptions) -> tuple[pl.DataFrame, Mesh]:
    """The activities with ``axis``, ``axis_size``, ``reason`` (null when it has an axis),
    ``crosses`` and ``_group`` (its own group's text); and the job's mesh."""
    me, keyed = member_ids(acts, devices, hosts, options.ranks_per_host)
    acts = acts.with_columns(_me=me)
    if not options.ranks_per_host:
        host_of = dict(zip(keyed["_me"].to_list(), keyed["_on"].to_list()))
    else:  # every id's host is known: ids // ranks_per_host
        host_of = _ById(options.ranks_per_host, dict(zip(keyed["_me"].to_list(),
                                                         keyed["_on"].to_list())))
    combos = acts.select("groups", "_me", "type").unique().filter(
        pl.col("groups").is_not_null()).sort("groups", "_me", "type")
    own: dict[tuple[str, int, str], Group | str] = {}
    for text, i, kind in combos.iter_rows():
        groups = parse_groups(text)
        found = None if groups is None else own_group(groups, i, kind == "collective-permute")
        own[(text, i, kind)] = BAD_GROUP if groups is None else (found or NOT_MEMBER)
    seen = sorted({g for g in own.values() if not isinstance(g, str)})
    world = max([max(keyed["_me"].max() or 0, 0) + 1, *(max(g) + 1 for g in seen)])
    if options.mesh and given_mesh(options.mesh).world < world:  # (a trace of some ranks
        # of a larger job numbers fewer: a larger mesh is fine)
        if options.mesh_source != "mesh":  # the HLO's mesh is not this job's: infer
            options = replace(options, mesh=())
        else:
            raise MeshMismatch(f"--mesh holds {given_mesh(options.mesh).world} devices, the "
                               f"job numbers {world} (its devices and process groups)")
    mesh = given_mesh(options.mesh, options.mesh_source) if options.mesh else (
        inferred_mesh(seen, world) if seen else Mesh(()))  # no group: no mesh to infer
    rows = []
    trace_names: dict[int, set[str]] = {}
    name_of = dict(acts.select("groups", "group_name").drop_nulls().unique()
                   .sort("groups", "group_name").iter_rows())
    for (text, i, kind), g in own.items():
        if isinstance(g, str):
            rows.append((text, i, kind, None, g, None))
            continue
        along = mesh.axes_of(g)
        if along is None:
            bad = any(x < 0 or x >= mesh.world for x in g)
            rows.append((text, i, kind, None, OUTSIDE if bad else NOT_GRID, None))
            continue
        if len(along) == 1 and text in name_of:
            trace_names.setdefault(along[0], set()).add(name_of[text])
        on = [host_of.get(x) for x in g]
        cross = None if None in on else len(set(on)) > 1
        rows.append((text, i, kind, along, None, cross))
    mesh = named(mesh, trace_names)
    used = {k for r in rows if r[3] for k in r[3]}
    mesh = Mesh(tuple(MeshAxis(a.name, a.size, a.stride, a.source, k in used)
                      for k, a in enumerate(mesh.axes)))
    mapping = pl.DataFrame(
        [(t, i, kind, None if a is None else "+".join(mesh.axes[k].name for k in a),
          None if a is None else _prod(mesh, a), r, c,
          None if isinstance(own[(t, i, kind)], str)
          else ",".join(map(str, own[(t, i, kind)])))  # type: ignore[arg-type]
         for t, i, kind, a, r, c in rows],
        schema={"groups": acts.schema["groups"], "_me": pl.Int64, "type": acts.schema["type"],
                "axis": pl.String,
                "axis_size": pl.Int64, "reason": pl.String, "crosses": pl.Boolean,
                "_group": pl.String},
        orient="row")
    acts = acts.join(mapping, on=["groups", "_me", "type"], how="left",
                     nulls_equal=False, maintain_order="left").with_columns(
        reason=pl.when(pl.col("groups").is_null()).then(
            pl.col("group_why") if "group_why" in acts.columns else pl.lit(None, pl.String))
        .otherwise(pl.col("reason"))).with_columns(
        reason=pl.when(pl.col("groups").is_null()).then(pl.col("reason").fill_null(NO_GROUP))
        .otherwise(pl.col("reason")))
    return acts, mesh


def with_comm(acts: pl.DataFrame, devices: pl.DataFrame, hosts: pl.DataFrame,
              options: AxesOptions = AxesOptions()) -> pl.DataFrame:
    """``acts`` with ``comm``: ``<axis>:<type>`` where the mesh tells axes apart (more than
    one axis, or named by --mesh or the trace), else the type: what ``scaling`` splits
    exposed communication by (``exposed_comm:fsdp:all-gather``)."""
    if acts.is_empty():
        return acts.with_columns(comm=pl.col("type"))
    m, mesh = mapped(acts, devices, hosts, options)
    distinct = len(mesh.axes) > 1 or any(a.source != "inferred" for a in mesh.axes)
    comm = pl.when(pl.col("axis").is_not_null() & distinct).then(
        pl.col("axis") + ":" + pl.col("type")).otherwise(pl.col("type"))
    return acts.with_columns(comm=m.select(comm).to_series())


def axes_of(acts: pl.DataFrame, devices: pl.DataFrame, hosts: pl.DataFrame,
            options: AxesOptions, alignment: str = "", pipe: pl.DataFrame | None = None
            ) -> Axes:
    """The :class:`Axes` result of the job's collective activities (module doc);
    ``alignment``: how the job's hosts are aligned (``meta.alignment``); ``pipe``: the
    job's ``pipeline_rows`` (bubbles per stage), when computed."""
    acts, mesh = mapped(with_inferred_groups(acts, devices, hosts, options), devices, hosts,
                        options)
    total_exposed = int(acts["exposed_ns"].sum() or 0)
    unmapped = tuple(Unmapped(r["reason"], int(r["count"]), int(r["exposed_ns"]))
                     for r in acts.filter(pl.col("axis").is_null()).group_by("reason").agg(
                         count=pl.len(), exposed_ns=pl.col("exposed_ns").sum())
                     .sort(["count", "reason"], descending=[True, False]).iter_rows(named=True))
    inferred = int(acts["group_inferred"].sum()) if "group_inferred" in acts.columns else 0
    return Axes(mesh=mesh.axes, world=mesh.world, axes=_axis_totals(acts, devices, options),
                unmapped=unmapped, activities=acts.height, exposed_ns=total_exposed,
                groups_inferred=inferred or None, groups_inferred_how=INFERRED if inferred
                else None,
                instances=instance_axes(acts), balance=balance(acts, alignment),
                pipeline=None if pipe is None else pipeline(
                    pipe, mesh, acts, acts.select("host", "rank", "device", "_me").unique()))


def axis_totals(acts: pl.DataFrame, devices: pl.DataFrame, hosts: pl.DataFrame,
                options: AxesOptions) -> tuple[AxisTotals, ...]:
    """Only the per-axis totals of :func:`axes_of` (what ``summarize`` shows): no instance
    table, balance or pipeline, which need activity ends and cost a pass each. The mapping
    runs on the activities' distinct combinations of what it reads (a few thousand), and
    each row takes its combination's axis columns by one gather: a job's millions of rows
    are never joined (the join copied every column: +230 MB at 128 hosts)."""
    keys = [c for c in _MAPPING_READS if c in acts.columns]
    combos, row = distinct_rows(acts.select(keys))
    m = mapped(combos, devices, hosts, options)[0].select(*_MAPPED)
    rows = acts.select(c for c in _TOTALS_READS if c in acts.columns).with_columns(
        m[c].gather(row) for c in _MAPPED)
    return _axis_totals(rows, devices, options)


_MAPPING_READS = ("host", "rank", "device", "groups", "group_name", "type")
"""The activity columns :func:`mapped` reads: an activity's axis depends on these alone."""
_MAPPED = ("axis", "axis_size", "crosses")
_TOTALS_READS = ("type", "msg_bytes", "dur_ns", "exposed_ns", "busbw_gb_per_s",
                 "group_inferred")


def _axis_totals(acts: pl.DataFrame, devices: pl.DataFrame, options: AxesOptions
                 ) -> tuple[AxisTotals, ...]:
    """Per mesh axis of the mapped ``acts``: its traffic, time, exposure and bus bandwidth,
    most exposed first."""
    total_exposed = int(acts["exposed_ns"].sum() or 0)
    intra = link_of(devices)
    return tuple(_totals(r, total_exposed, intra, options.nic_gb_per_s) for r in acts.filter(
        pl.col("axis").is_not_null()).group_by("axis").agg(
        size=pl.col("axis_size").first(), types=pl.col("type").unique().sort(),
        crosses=pl.col("crosses").any(), cross_null=pl.col("crosses").is_null().any(),
        inferred=(pl.col("group_inferred").sum() if "group_inferred" in acts.columns
                  else pl.lit(0)),
        count=pl.len(), bytes=pl.col("msg_bytes").sum(),
        unsized=pl.col("msg_bytes").is_null().sum(), time_ns=pl.col("dur_ns").sum(),
        exposed_ns=pl.col("exposed_ns").sum(), med=pl.col("busbw_gb_per_s").median(),
        p10=pl.col("busbw_gb_per_s").quantile(0.1, "nearest"),
        p90=pl.col("busbw_gb_per_s").quantile(0.9, "nearest"),
    ).sort(["exposed_ns", "time_ns", "axis"], descending=[True, True, False])
        .iter_rows(named=True))


def _prod(mesh: Mesh, along: tuple[int, ...]) -> int:
    out = 1
    for k in along:
        out *= mesh.axes[k].size
    return out


def _totals(r: dict[str, object], total_exposed: int, intra: float | None,
            nic: float | None) -> AxisTotals:
    crosses = None if r["cross_null"] and not r["crosses"] else bool(r["crosses"])
    link = None if crosses is None else ("inter" if crosses else "intra")
    peak = (nic if link == "inter" else intra / 2 if link == "intra" and intra else None)
    med = r["med"]
    pct = None if med is None or not peak else 100.0 * float(med) / peak  # type: ignore[arg-type]
    exposed = int(r["exposed_ns"])  # type: ignore[call-overload]
    return AxisTotals(
        axis=str(r["axis"]), size=int(r["size"]), crosses_hosts=crosses,  # type: ignore
        types=tuple(r["types"]), count=int(r["count"]), bytes=int(r["bytes"] or 0),  # type: ignore
        unsized=int(r["unsized"]), time_ns=int(r["time_ns"]), exposed_ns=exposed,  # type: ignore
        exposed_share=exposed / total_exposed if total_exposed else None,
        link=link, link_gb_per_s=peak,
        busbw=Busbw(median=med, p10=r["p10"], p90=r["p90"], link_pct=pct),  # type: ignore
        groups_inferred=int(r["inferred"]) or None)  # type: ignore[call-overload]


def instance_axes(acts: pl.DataFrame) -> tuple[InstanceAxis, ...]:
    """Every matched instance and its axis: the axis its participants agree on (the first
    known, in device order), else the reason of its first participant."""
    if acts.is_empty():
        return ()
    m = match_instances(acts)
    inst = m.group_by("instance_key", "occurrence").agg(
        type=pl.col("type").first(), op=pl.col("op").first(),
        start=pl.col("first_start_ns").first(), participants=pl.len(),
        key=pl.col("instance_key").first(),
        axis=pl.col("axis").drop_nulls().first(), reason=pl.col("reason").first(),
    ).sort("start", "instance_key", "occurrence")
    return tuple(InstanceAxis(r["type"], r["op"], int(r["occurrence"]), int(r["start"]),
                              int(r["participants"]), r["axis"],
                              None if r["axis"] is not None else r["reason"], r["key"])
                 for r in inst.iter_rows(named=True))


def hosts_of(meta: TraceMeta) -> pl.DataFrame:
    """The job's hosts (as placed) and whether the trace names them."""
    return hosts_frame(tuple((h, i.named) for h, i in meta.hosts.items()))


def hosts_frame(hosts: Sequence[tuple[str, bool]]) -> pl.DataFrame:
    """(host, named) pairs (:attr:`tracelens.engine.protocol.JobPlan.hosts`) as the frame the axes
    read."""
    return pl.DataFrame({"host": [h for h, _ in hosts], "named": [n for _, n in hosts]},
                        schema={"host": pl.String, "named": pl.Boolean})


def with_axes(c: Collectives, acts: pl.DataFrame, devices: pl.DataFrame,
              hosts: pl.DataFrame, options: AxesOptions) -> Collectives:
    """The collectives result with its per-axis totals and each worst instance's axis,
    from the same activities (``collective_activities`` of the job, placed)."""
    a = axes_of(acts, devices, hosts, options, c.alignment)
    by = {(i.key, i.occurrence): i.axis for i in a.instances}
    worst = tuple(replace(w, axis=by.get((w.key, w.occurrence))) for w in c.worst)
    return replace(c, worst=worst, mesh=a.mesh, axes=a.axes, unmapped=a.unmapped,
                   groups_inferred=a.groups_inferred, groups_inferred_how=a.groups_inferred_how)
