"""The rocpd 3.0 schema rocprofv3 creates (``rocpd_tables.sql``, ``rocpd_views.sql``), for the
writer: per-process tables named ``<table>_<uuid>`` and un-suffixed views of the same name.

Only the tables a trace-only run fills are here, with their real column lists and types
(rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd``, schema 3.0.x).
"""

from __future__ import annotations

SCHEMA_VERSION = "3"

_GUID = '"guid" TEXT DEFAULT "@GUID@" NOT NULL'
_EXT = '"extdata" JSONB DEFAULT "{}" NOT NULL'

TABLES: dict[str, str] = {
    "rocpd_metadata": '"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "tag" TEXT NOT NULL, '
                      '"value" TEXT NOT NULL',
    "rocpd_string": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                    '"string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT',
    "rocpd_info_node": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                       '"hash" BIGINT NOT NULL UNIQUE, "machine_id" TEXT NOT NULL UNIQUE, '
                       '"system_name" TEXT, "hostname" TEXT, "release" TEXT, "version" TEXT, '
                       '"hardware_name" TEXT, "domain_name" TEXT',
    "rocpd_info_process": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                          '"nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, '
                          '"init" BIGINT, "fini" BIGINT, "start" BIGINT, "end" BIGINT, '
                          '"command" TEXT, "environment" JSONB DEFAULT "{}" NOT NULL, '
                          f'{_EXT}',
    "rocpd_info_thread": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                         '"nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, '
                         '"tid" INTEGER NOT NULL, "name" TEXT, "start" BIGINT, "end" BIGINT, '
                         f'{_EXT}',
    "rocpd_info_agent": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                        '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "type" TEXT CHECK '
                        '("type" IN (\'CPU\', \'GPU\', \'NIC\')), "absolute_index" INTEGER, '
                        '"logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER, '
                        '"name" TEXT, "model_name" TEXT, "vendor_name" TEXT, '
                        f'"product_name" TEXT, "user_name" TEXT, {_EXT}',
    "rocpd_info_queue": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                        f'"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT, {_EXT}',
    "rocpd_info_stream": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                         f'"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT, {_EXT}',
    "rocpd_info_code_object": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                              '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, '
                              '"agent_id" INTEGER, "uri" TEXT, "load_base" BIGINT, '
                              '"load_size" BIGINT, "load_delta" BIGINT, "storage_type" TEXT '
                              'CHECK ("storage_type" IN (\'FILE\', \'MEMORY\')), ' + _EXT,
    "rocpd_info_kernel_symbol": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                                '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, '
                                '"code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, '
                                '"display_name" TEXT, "kernel_object" INTEGER, '
                                '"kernarg_segment_size" INTEGER, '
                                '"kernarg_segment_alignment" INTEGER, '
                                '"group_segment_size" INTEGER, "private_segment_size" INTEGER, '
                                '"sgpr_count" INTEGER, "arch_vgpr_count" INTEGER, '
                                f'"accum_vgpr_count" INTEGER, {_EXT}',
    "rocpd_track": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                   '"nid" INTEGER NOT NULL, "pid" INTEGER, "tid" INTEGER, "name_id" INTEGER, '
                   + _EXT,
    "rocpd_event": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                   '"category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER, '
                   '"correlation_id" INTEGER, "call_stack" JSONB DEFAULT "{}" NOT NULL, '
                   f'"line_info" JSONB DEFAULT "{{}}" NOT NULL, {_EXT}',
    "rocpd_arg": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                 '"event_id" INTEGER NOT NULL, "position" INTEGER NOT NULL, '
                 '"type" TEXT NOT NULL, "name" TEXT NOT NULL, "value" TEXT, ' + _EXT,
    "rocpd_region": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                    '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL, '
                    '"start" BIGINT NOT NULL, "end" BIGINT NOT NULL, '
                    f'"name_id" INTEGER NOT NULL, "event_id" INTEGER, {_EXT}',
    "rocpd_sample": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                    '"track_id" INTEGER NOT NULL, "timestamp" BIGINT NOT NULL, '
                    f'"event_id" INTEGER, {_EXT}',
    "rocpd_kernel_dispatch": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                             '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, '
                             '"agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, '
                             '"dispatch_id" INTEGER NOT NULL, "queue_id" INTEGER NOT NULL, '
                             '"stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, '
                             '"end" BIGINT NOT NULL, "private_segment_size" INTEGER, '
                             '"group_segment_size" INTEGER, '
                             '"workgroup_size_x" INTEGER NOT NULL, '
                             '"workgroup_size_y" INTEGER NOT NULL, '
                             '"workgroup_size_z" INTEGER NOT NULL, '
                             '"grid_size_x" INTEGER NOT NULL, "grid_size_y" INTEGER NOT NULL, '
                             '"grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, '
                             f'"event_id" INTEGER, {_EXT}',
    "rocpd_info_pmc": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                      '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER, '
                      '"target_arch" TEXT, "event_code" INTEGER, "instance_id" INTEGER, '
                      '"name" TEXT NOT NULL, "symbol" TEXT, "description" TEXT, '
                      '"long_description" TEXT, "component" TEXT, "units" TEXT, '
                      '"value_type" TEXT, "block" TEXT, "expression" TEXT, '
                      f'"is_constant" INTEGER, "is_derived" INTEGER, {_EXT}',
    "rocpd_pmc_event": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                       '"event_id" INTEGER, "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0, '
                       + _EXT,
    "rocpd_memory_copy": f'"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {_GUID}, '
                         '"nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, '
                         '"start" BIGINT NOT NULL, "end" BIGINT NOT NULL, '
                         '"name_id" INTEGER NOT NULL, "dst_agent_id" INTEGER, '
                         '"dst_address" INTEGER, "src_agent_id" INTEGER, '
                         '"src_address" INTEGER, "size" INTEGER NOT NULL, "queue_id" INTEGER, '
                         '"stream_id" INTEGER, "region_name_id" INTEGER, "event_id" INTEGER, '
                         + _EXT,
}


def ddl(uuid: str, guid: str) -> str:
    """CREATE TABLE and CREATE VIEW statements for one process (``uuid`` uses underscores)."""
    out = []
    for name, cols in TABLES.items():
        body = cols.replace("@GUID@", guid)
        out.append(f'CREATE TABLE IF NOT EXISTS "{name}_{uuid}" ({body});')
    for name in TABLES:
        out.append(f'CREATE VIEW IF NOT EXISTS "{name}" AS SELECT * FROM "{name}_{uuid}";')
    return "\n".join(out)
