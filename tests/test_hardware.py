"""GPU identification and the peak table: values against the reference datasheet figures,
CUs × clock derivation, overrides (--gpu, specs files) and ROCm's halved HBM stat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


from tracelens.loading import identify as ident
from tracelens.core.hardware import (
    SPECS,
    derive_peaks,
    find_spec,
    load_specs_file,
    reported_bandwidth_warning,
    spec_for_device,
)
from tracelens.loading.identify import identify

GIB = 1 << 30

# Dense TFLOP/s (int8 TOPS), HBM TB/s, memory GB, link GB/s, literally from
# shared/reference/rocprof.md §5.2 (AMD) and §5.3 (NVIDIA).
REFERENCE = {
    "mi300x": ({"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4,
                "fp8": 2614.9, "int8": 2614.9}, 5.3, 192, 896),
    "mi325x": ({"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4,
                "fp8": 2614.9, "int8": 2614.9}, 6.0, 256, 896),
    "mi350x": ({"fp64": 72.1, "fp32": 144.2, "fp16": 2306.9, "bf16": 2306.9, "fp8": 4613.7,
                "fp6": 9227.5, "fp4": 9227.5, "int8": 4613.7}, 8.0, 288, 1075.2),
    "mi355x": ({"fp64": 78.6, "fp32": 157.3, "fp16": 2516.6, "bf16": 2516.6, "fp8": 5033.2,
                "fp6": 10066.3, "fp4": 10066.3, "int8": 5033.2}, 8.0, 288, 1075.2),
    "h100": ({"fp64": 67, "fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
              "fp8": 1978.9, "int8": 1978.9}, 3.35, 80, 900),
    "h200": ({"fp64": 67, "fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
              "fp8": 1978.9, "int8": 1978.9}, 4.8, 141, 900),
    "b200": ({"fp64": 37, "fp32": 75, "tf32": 1100, "fp16": 2250, "bf16": 2250, "fp8": 4500,
              "fp6": 4500, "fp4": 9000, "int8": 4500}, 8.0, 180, 1800),
    # Issue 12: vendor datasheets (AMD: per GCD for MI250X = half the OAM figures;
    # NVIDIA: dense = the starred sparse figure / 2)
    "mi250x": ({"fp64": 47.9, "fp32": 47.9, "fp16": 191.5, "bf16": 191.5, "int8": 191.5},
               1.6384, 64, None),
    # Issue 47: the MI250 datasheet per OAM (90.5 TF FP64 matrix, 362.1 TF FP16, 3.2768 TB/s,
    # 128 GB), halved per GCD as for the MI250X
    "mi250": ({"fp64": 45.3, "fp32": 45.3, "fp16": 181.0, "bf16": 181.0, "int8": 181.0},
              1.6384, 64, None),
    "mi210": ({"fp64": 45.3, "fp32": 45.3, "fp16": 181.0, "bf16": 181.0, "int8": 181.0},
              1.6384, 64, 300),
    "a100": ({"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624},
             2.039, 80, 600),
    "a100-40gb": ({"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312,
                   "int8": 624}, 1.555, 40, 600),
    "v100": ({"fp64": 7.8, "fp32": 15.7, "fp16": 125}, 0.9, 32, 300),
    "l40s": ({"fp32": 91.6, "tf32": 183, "fp16": 362.05, "bf16": 362.05, "fp8": 733,
              "int8": 733}, 0.864, 48, None),
    "gh200": ({"fp64": 67, "fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
               "fp8": 1978.9, "int8": 1978.9}, 4.0, 96, 900),
    "h800": ({"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9,
              "int8": 1978.9}, 3.35, 80, 400),
    # Issue 25 A3: the table's gaps (datasheet figures, dense = the starred sparse one / 2)
    "h100-pcie": ({"fp64": 51, "fp32": 51, "tf32": 378, "fp16": 756.5, "bf16": 756.5,
                   "fp8": 1513, "int8": 1513}, 2.0, 80, 600),
    "h100-nvl": ({"fp64": 60, "fp32": 60, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5,
                  "fp8": 1670.5, "int8": 1670.5}, 3.9, 94, 600),
    "h20": ({"fp64": 1, "fp32": 44, "tf32": 74, "fp16": 148, "bf16": 148, "fp8": 296,
             "int8": 296}, 4.0, 96, 900),
    "a800": ({"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312,
              "int8": 624}, 2.039, 80, 400),
    "a800-40gb": ({"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312,
                   "int8": 624}, 1.555, 40, 400),
    "mi308x": ({}, None, None, None),  # 80 CUs only: FLOPs from the trace's clock, else unknown
    # Issue 48: Google Cloud TPU docs, per chip (GiB where Google says GiB)
    "tpu-v4": ({"bf16": 275, "int8": 275}, 1.2, 32 * 2**30 / 1e9, None),
    "tpu-v5e": ({"bf16": 197, "int8": 393}, 0.819, 16, 400),
    "tpu-v5p": ({"bf16": 459}, 2.765, 95 * 2**30 / 1e9, 1200),
    "tpu-v6e": ({"bf16": 918, "int8": 1836}, 1.638, 32, 800),
    "tpu-v7": ({"bf16": 2307, "fp8": 4614}, 7.38, 192 * 2**30 / 1e9, 1200),
}


def test_every_table_entry_has_peaks_and_memory() -> None:
    """``tracelens gpus`` shows no gap in FLOPs, HBM or memory for any built-in GPU."""
    for gid, s in SPECS.items():
        if gid in ("mi300a", "mi308x"):
            continue  # HBM bandwidth (MI308X: clock and memory too) unsourced: unknown
        assert s.peak_tflops and s.hbm_tb_per_s and s.memory_gb, gid
    assert set(REFERENCE) | {"mi300a"} == set(SPECS)


def test_new_products_identified_by_properties_or_name() -> None:
    assert identify("amd", "gfx90a", 110, 1700.0, 64 * GIB).spec_id == "mi250x"
    assert identify("nvidia", "sm_80", 108, 1410.0, 80 * GIB).spec_id == "a100"
    assert identify("nvidia", "sm_80", 108, 1410.0, 40 * GIB).spec_id == "a100-40gb"
    assert identify("nvidia", "sm_70", 80, 1530.0, 16 * GIB).spec_id == "v100"
    assert identify("nvidia", "sm_89", 142, 2520.0, 48 * GIB).spec_id == "l40s"
    # GH200's GPU looks like an H100 by its properties: only its name says GH200
    assert identify("nvidia", "sm_90", 132, 1980.0, 80 * GIB).spec_id == "h100"
    assert ident.identify_by_name("NVIDIA GH200 480GB").spec_id == "gh200"
    assert ident.identify_by_name("Tesla V100-SXM2-16GB").spec_id == "v100"
    assert ident.identify_by_name("NVIDIA A100-SXM4-80GB", 80 * GIB).spec_id == "a100"
    assert ident.identify_by_name("NVIDIA A100 PCIe") is None  # memory decides
    assert ident.identify_by_name("NVIDIA A100-SXM4-80GB").spec_id == "a100"  # name says
    assert ident.identify_by_name("NVIDIA H100 80GB HBM3").spec_id == "h100"
    assert ident.identify_by_name("gfx942") is None
    assert ident.vendor_from_name("Tesla V100-SXM2-16GB") == "nvidia"
    assert ident.vendor_from_name("AMD Instinct MI210") == "amd"
    assert ident.vendor_from_name("some accelerator") is None


def test_mi250_and_mi250x_told_apart_by_name_and_cus() -> None:
    """ROCm names both MI200 OAMs' GCDs "AMD Instinct MI250X / MI250" (PCI device 0x740C):
    the CUs say which (110: MI250X, 104: MI250); without them the name stays ambiguous. An
    MI250 GCD has the MI210's properties: only a name says MI250. Before issue 47 the 104-CU
    device of that name was left unidentified (the longest alias, MI250X, disagreed)."""
    both = "AMD Instinct MI250X / MI250"
    assert ident.identify_device(both, "amd", "gfx90a", 104, 1700.0, 64 * GIB)[0].spec_id \
        == "mi250"
    assert ident.identify_device(both, "amd", "gfx90a", 110, 1700.0, 64 * GIB)[0].spec_id \
        == "mi250x"
    assert ident.identify_by_name(both, 64 * GIB) is None  # no CUs: either one
    assert ident.identify_by_name("AMD Instinct MI250").spec_id == "mi250"
    assert ident.identify_by_name("AMD Instinct MI250X").spec_id == "mi250x"
    assert identify("amd", "gfx90a", 104, 1700.0, 64 * GIB).spec_id == "mi210"  # as before
    assert find_spec("MI250").id == "mi250" and find_spec("mi250x").id == "mi250x"
    assert "per GCD" in SPECS["mi250"].notes and any("mi250.html" in s
                                                       for s in SPECS["mi250"].sources)


@pytest.mark.parametrize("gid", sorted(REFERENCE))
def test_table_matches_the_reference_figures(gid: str) -> None:
    peaks, hbm, mem, link = REFERENCE[gid]
    s = SPECS[gid]
    assert s.peak_tflops == peaks
    assert (s.hbm_tb_per_s, s.memory_gb, s.link_gb_per_s) == (hbm, mem, link)
    assert s.sources


@pytest.mark.parametrize("gid", ["mi300x", "mi325x", "mi350x", "mi355x"])
def test_derivation_from_cus_and_clock_reproduces_amd_figures(gid: str) -> None:
    s = SPECS[gid]
    assert derive_peaks(s.arch, s.compute_units, s.clock_mhz) == REFERENCE[gid][0]
    used = spec_for_device(gid, s.arch, s.compute_units, s.clock_mhz)
    assert used.peak_tflops == REFERENCE[gid][0] and used.source.startswith("derived")


def test_partitioned_or_unknown_amd_device_gets_derived_flops_and_no_hbm() -> None:
    # an MI300X in CPX mode: one XCD of 38 CUs is one device
    assert identify("amd", "gfx942", 38, 2100.0, 24 * GIB) is None
    s = spec_for_device(None, "gfx942", 38, 2100.0)
    assert s.peak("bf16") == 163.4 and s.hbm_tb_per_s is None
    assert spec_for_device(None, "gfx1100", 48, 2500.0) is None  # no per-CU rates: unknown
    assert spec_for_device(None, None, None, None) is None


def test_identify_keeps_working_for_existing_callers() -> None:
    assert identify("amd", "gfx942", 304, 2100.0, 192 * GIB).spec_id == "mi300x"
    assert identify("amd", "gfx942", 304, 2100.0, 256 * GIB).spec_id == "mi325x"
    assert identify("amd", "gfx950", 256, 2200.0, 288 * GIB).spec_id == "mi350x"
    assert identify("amd", "gfx950", 256, 2400.0, 288 * GIB).spec_id == "mi355x"
    assert identify("nvidia", "sm_90", 132, 1980.0, 80 * GIB).spec_id == "h100"
    assert identify("nvidia", "sm_90", 132, 1980.0, 141 * GIB).spec_id == "h200"
    assert identify("amd", "gfx942", 304, 2100.0, None) is None  # ambiguous: never a guess
    assert ident.AMD_ARCH_BY_CAP[(9, 4)] == "gfx942"
    assert {p.spec_id for p in ident.PRODUCTS} <= set(SPECS)


def test_find_spec_by_id_name_or_alias() -> None:
    for name in ("mi300x", "MI300X", "AMD Instinct MI300X", "amd-instinct-mi300x"):
        assert find_spec(name).id == "mi300x"
    assert find_spec("H100 SXM").id == find_spec("h100-sxm5").id == "h100"
    assert find_spec("tpu-v3") is None
    # TPUs by the names their XSpace planes give (device_type_string) and Google's names
    assert find_spec("TPU v5 Lite").id == find_spec("TPU v5e").id == "tpu-v5e"
    assert find_spec("TPU v5").id == "tpu-v5p"
    assert ident.identify_by_name("TPU v5 Lite").spec_id == "tpu-v5e"
    assert ident.identify_by_name("TPU v5").spec_id == "tpu-v5p"
    assert ident.identify_by_name("TPU v6 lite").spec_id == "tpu-v6e"
    assert ident.identify_by_name("TPU7x").spec_id == "tpu-v7"
    assert ident.identify_by_name("TPU v4").spec_id == "tpu-v4"


def test_a_device_s_own_peaks_replace_the_table_s() -> None:
    """A TPU plane's peak_teraflops_per_second and HBM figure are used (bf16 and HBM), the
    rest of the entry stays; --gpu still forces the table's entry."""
    used = spec_for_device("tpu-v5e", "tpu-v5e", None, None, own=(202.7, 0.8191576375296))
    assert used.peak_tflops == {"bf16": 202.7, "int8": 393}
    assert used.hbm_tb_per_s == 0.8191576375296 and used.source.startswith("trace:")
    forced = spec_for_device("tpu-v5e", "tpu-v5e", None, None, gpu="tpu-v5e",
                             own=(202.7, 0.819))
    assert forced.peak_tflops["bf16"] == 197
    unknown = spec_for_device(None, None, None, None, own=(100.0, None), own_name="TPU v9")
    assert unknown.peak_tflops == {"bf16": 100.0} and unknown.hbm_tb_per_s is None
    assert unknown.name == "TPU v9" and unknown.source.startswith("trace:")


def test_find_spec_refuses_a_name_two_gpus_answer_to() -> None:
    # "A100" is the 40 GB and the 80 GB card (different HBM bandwidth): never the first one
    with pytest.raises(ValueError, match="a100-40gb"):
        find_spec("A100")
    assert find_spec("a100").id == "a100"  # an id as written
    assert find_spec("A100 40GB").id == "a100-40gb"


def test_cli_gpu_ambiguous_name_is_a_usage_error(tmp_path) -> None:
    from click.testing import CliRunner

    from tracelens.cli.commands import main
    sample = sorted(Path("sample_traces").glob("*.xplane.pb"))[0]
    res = CliRunner().invoke(main, ["summarize", str(sample), "--gpu", "A100"])
    assert res.exit_code == 2
    assert "names 2 GPUs" in res.output and "a100-40gb" in res.output


def test_gpu_override_and_nvidia_uses_the_table() -> None:
    s = spec_for_device("mi300x", "gfx942", 304, 2100.0, gpu="H200")
    assert s.id == "h200" and s.peak("bf16") == 989.4 and "--gpu" in s.source
    with pytest.raises(ValueError, match="unknown GPU"):
        spec_for_device("mi300x", "gfx942", 304, 2100.0, gpu="nope")
    # NVIDIA peaks are not derived from the trace's SM count and (boost) clock
    assert spec_for_device("h100", "sm_90", 132, 1980.0).peak("bf16") == 989.4


def test_specs_file_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "gpus.toml"
    toml.write_text('[mi300x]\nhbm_tb_per_s = 5.0\n\n[lab_gpu]\nbase = "mi355x"\n'
                    'name = "Lab GPU"\npeak_tflops = { bf16 = 2000.0 }\n')
    extra = load_specs_file(toml)
    assert extra["mi300x"].hbm_tb_per_s == 5.0 and extra["mi300x"].peak("bf16") == 1307.4
    assert extra["lab_gpu"].peak("bf16") == 2000.0 and extra["lab_gpu"].peak("fp8") == 5033.2
    # an identified MI300X uses the file's numbers as given; --gpu selects new ids
    assert spec_for_device("mi300x", "gfx942", 304, 2100.0, extra=extra).hbm_tb_per_s == 5.0
    assert spec_for_device("mi300x", "gfx942", 304, 2100.0, gpu="lab_gpu",
                           extra=extra).name == "Lab GPU"
    js = tmp_path / "one.json"
    js.write_text(json.dumps({"mystery": {"peak_tflops": {"bf16": 100}, "hbm_tb_per_s": 1}}))
    one = load_specs_file(js)
    # a file with one new entry applies to every device
    assert spec_for_device("mi300x", "gfx942", 304, 2100.0, extra=one).id == "mystery"
    assert spec_for_device(None, None, None, None, extra=one).hbm_tb_per_s == 1.0


@pytest.mark.parametrize("text,problem", [
    ('[x]\nbogus = 1\n', "unknown field"),
    ('[x]\npeak_tflops = { fp7 = 1.0 }\n', "unknown dtype"),
    ('[x]\nbase = "mi999"\n', "not a built-in"),
    ('[x]\nhbm_tb_per_s = -1\n', "non-negative number"),
    ('[x]\nhbm_tb_per_s = "fast"\n', "non-negative number"),
    ('x = 1\n', "table of fields"),
])
def test_specs_file_errors_name_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ValueError, match=problem):
        load_specs_file(p)


def test_rocm_memory_bandwidth_stat_is_only_a_warning() -> None:
    w = reported_bandwidth_warning("mi300x", 2.6624e12)  # as the MI300X traces report it
    assert w and "2.66 TB/s" in w.text and "5.3 TB/s" in w.text
    assert reported_bandwidth_warning("mi300x", 5.3e12) is None
    assert reported_bandwidth_warning("mi300x", None) is None
    assert reported_bandwidth_warning(None, 2.6e12) is None


@pytest.mark.parametrize("name, want", [
    ("NVIDIA H800", "NVIDIA H800"),           # H100's properties, its own name and links
    ("NVIDIA H20", None),                     # a model the table lacks: never an H100
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("", "NVIDIA H100 SXM"),                  # no name: the properties decide
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),  # 114 SMs: not the 132-SM SXM part
    ("NVIDIA H800 PCIe", None),               # an H100 PCIe's properties, a model we lack
])
def test_kineto_device_named_by_the_trace(name: str, want: str | None) -> None:
    """Issue 25 A3: a Kineto ``deviceProperties`` entry named ``NVIDIA H800`` was reported as
    ``NVIDIA H100 SXM`` (900 GB/s NVLink instead of 400) because its SMs and memory match."""
    from parsers.kineto.devices import device_frame
    from tracelens.loading.devices import identify_frame

    sms = 114 if "PCIe" in name else 132
    props = [{"id": 0, "name": name, "computeMajor": 9, "computeMinor": 0, "numSms": sms,
              "totalGlobalMem": 85_000_000_000, "warpSize": 32}]
    facts, _ = device_frame({"deviceProperties": props}, [0], "h")
    frame, notes = identify_frame(facts, "kineto", "h.json")
    warnings = [n.text for _, _, n in notes]
    row = frame.row(0, named=True)
    assert row["product"] == (want or name)
    if want is None:
        assert row["spec_id"] is None and any(
            "peaks unknown" in w or "not a known product" in w for w in warnings)
    else:
        assert SPECS[row["spec_id"]].name == want


@pytest.mark.parametrize("name, sms, gib, want", [
    ("NVIDIA H20", 78, 95.0, "h20"),
    ("", 78, 95.0, "h20"),                    # no name: 78 SMs of sm_90 are only an H20
    ("NVIDIA H100 NVL", 132, 93.6, "h100-nvl"),
    ("", 132, 93.6, None),                    # 94 GB and 132 SMs: NVL or GH200, never a guess
    ("NVIDIA H100 PCIe", 114, 79.6, "h100-pcie"),
    ("NVIDIA A800-SXM4-80GB", 108, 79.3, "a800"),
    ("NVIDIA A800 40GB Active", 108, 39.4, "a800-40gb"),
    ("", 108, 79.3, "a100"),                  # an A800 without its name is an A100: the name
])                                            # decides, as for H800
def test_table_gaps_are_identified_name_first(name: str, sms: int, gib: float,
                                              want: str | None) -> None:
    """Issue 25 A3: H20, H100 PCIe/NVL and A800 were not in the table (an H20 was unknown, an
    H100 NVL an H100 SXM, an A800 an A100 with 600 GB/s NVLink)."""
    arch = "sm_80" if sms == 108 else "sm_90"
    product, unused = ident.identify_device(name, "nvidia", arch, sms, None,
                                               int(gib * GIB))
    assert (product.spec_id if product else None) == want and unused is None


def test_mi308x_is_identified_by_its_80_cus_and_derives_flops_from_the_clock() -> None:
    p, _ = ident.identify_device("AMD Instinct MI308X", "amd", "gfx942", 80, None, None)
    assert p is not None and p.spec_id == "mi308x"
    assert identify("amd", "gfx942", 80, 2100.0, 192 * GIB).spec_id == "mi308x"
    assert spec_for_device("mi308x", "gfx942", 80, None).peak_tflops == {}  # no clock: unknown
    assert spec_for_device("mi308x", "gfx942", 80, 2100.0).peak("bf16") == round(
        80 * 2100 * 2048 / 1e6, 1)


def test_a_device_without_vendor_is_identified_by_its_capability_under_one_reading() -> None:
    assert ident.identify_by_capability(7, 0, 80, 1530.0, 16 * GIB).spec_id == "v100"
    assert ident.identify_by_capability(9, 0, 132, 1980.0, 80 * GIB).spec_id == "h100"
    assert ident.identify_by_capability(9, 4, 304, 2100.0, 192 * GIB).spec_id == "mi300x"
    assert ident.identify_by_capability(9, 0, 120, 1502.0, 32 * GIB) is None  # MI100: none
