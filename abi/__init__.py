"""ABI v1: the contract between the Amber host and a guest Wasm module.

The design (abi/README.md has the full text): a guest is a plain core module that exports
`memory`, `amber_alloc` and one entry point per workflow and activity; each activation is a
single call taking and returning msgpack envelopes; a workflow activation replays from the start
with every recorded result passed in at once (the *batch* shape) and hands back the full command
list, which the host matches against history. The module's manifest sits in a custom section so
it can be read without running guest code.

Python guests are components (componentize-py builds nothing else) speaking the same envelopes
through a small WIT world (`abi/wit/amber.wit`): one export call per activation, envelopes as
latin-1 strings, because wasmtime-py converts a `list<u8>` one element at a time.

Rejected alternatives: the component model for C guests (the byte-list conversion above, and a
larger host surface); one host-import call per replayed command (a Python round trip each);
a manifest obtained by calling the guest at upload (runs untrusted code to validate it).

This package also holds what every package needs, being the bottom of the import graph: the root
of Amber's error tree and the lazy re-exports of package `__init__`s.
"""

from amber import _checkout

_checkout.alias(__name__)


from ._codec import NotMsgpack, jsonable, pack, pack_with_bytes, payload_json, unpack
from ._commands import (
    MAX_TIMER_MS,
    PARENT_CLOSE_POLICIES,
    ActivityOptions,
    AwaitSignal,
    CancelTimer,
    Command,
    MalformedEnvelope,
    Patched,
    RecordNow,
    RecordRandom,
    RequestApproval,
    RetryOptions,
    ScheduleActivity,
    StartChild,
    StartTimer,
    command_kind,
    encode_command,
    options_to_doc,
    parse_activity_options,
    parse_command,
    parse_retry,
)
from ._component import (
    COMPONENT_EXPORTS,
    COMPONENT_HOST_INTERFACE,
    COMPONENT_WASI_PREFIX,
    COMPONENT_WIT,
    latin1_bytes,
    latin1_text,
)
from ._envelopes import (
    MAX_ENVELOPE_BYTES,
    MAX_RANDOM_BYTES,
    ActivityInput,
    ActivityOutcome,
    ActivityStatus,
    CancelRequest,
    ErrorInfo,
    RecordedResult,
    WorkflowOutcome,
    WorkflowStatus,
    decode_activity_output,
    decode_workflow_output,
    encode_activity_input,
    encode_workflow_input,
)
from ._errors import (
    AmberError,
    Conflict,
    InvalidInput,
    NotFound,
    RetryableError,
    error_fields,
    error_types,
    rebuild_error,
)
from ._known_commands import NOTHING_KNOWN, KnownCommands, decode_workflow_output_after
from ._lazy import lazy_exports
from ._manifest import (
    ABI_VERSION,
    ACTIVITY_EXPORT_PREFIX,
    MANIFEST_SECTION,
    NAME,
    WORKFLOW_EXPORT_PREFIX,
    Manifest,
    ManifestError,
    parse_manifest,
    read_manifest,
)
from ._signatures import (
    ALLOC_EXPORT,
    ALLOC_SIGNATURE,
    ENTRY_SIGNATURE,
    HOST_IMPORTS,
    HOST_MODULE,
    MEMORY_EXPORT,
    TEST_HOST_IMPORTS,
    TEST_HOST_IMPORTS_ENV,
    Signature,
    allowed_host_imports,
)
from ._wasm import WasmFormatError, custom_section, custom_sections, is_component

__all__ = [
    "ABI_VERSION",
    "ACTIVITY_EXPORT_PREFIX",
    "ALLOC_EXPORT",
    "ALLOC_SIGNATURE",
    "COMPONENT_EXPORTS",
    "COMPONENT_HOST_INTERFACE",
    "COMPONENT_WASI_PREFIX",
    "COMPONENT_WIT",
    "ENTRY_SIGNATURE",
    "HOST_IMPORTS",
    "HOST_MODULE",
    "MANIFEST_SECTION",
    "MAX_ENVELOPE_BYTES",
    "MAX_RANDOM_BYTES",
    "MAX_TIMER_MS",
    "MEMORY_EXPORT",
    "NAME",
    "NOTHING_KNOWN",
    "PARENT_CLOSE_POLICIES",
    "TEST_HOST_IMPORTS",
    "TEST_HOST_IMPORTS_ENV",
    "WORKFLOW_EXPORT_PREFIX",
    "ActivityInput",
    "ActivityOptions",
    "ActivityOutcome",
    "ActivityStatus",
    "AmberError",
    "AwaitSignal",
    "CancelRequest",
    "CancelTimer",
    "Command",
    "Conflict",
    "ErrorInfo",
    "InvalidInput",
    "KnownCommands",
    "MalformedEnvelope",
    "Manifest",
    "ManifestError",
    "NotFound",
    "NotMsgpack",
    "Patched",
    "RecordNow",
    "RecordRandom",
    "RecordedResult",
    "RequestApproval",
    "RetryOptions",
    "RetryableError",
    "ScheduleActivity",
    "Signature",
    "StartChild",
    "StartTimer",
    "WasmFormatError",
    "WorkflowOutcome",
    "WorkflowStatus",
    "allowed_host_imports",
    "command_kind",
    "custom_section",
    "custom_sections",
    "decode_activity_output",
    "decode_workflow_output",
    "decode_workflow_output_after",
    "encode_activity_input",
    "encode_command",
    "encode_workflow_input",
    "error_fields",
    "error_types",
    "is_component",
    "jsonable",
    "latin1_bytes",
    "latin1_text",
    "lazy_exports",
    "options_to_doc",
    "pack",
    "pack_with_bytes",
    "parse_activity_options",
    "parse_command",
    "parse_manifest",
    "parse_retry",
    "payload_json",
    "read_manifest",
    "rebuild_error",
    "unpack",
]
