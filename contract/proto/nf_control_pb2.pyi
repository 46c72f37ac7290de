from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    PRIMARY: _ClassVar[Role]
    BACKUP: _ClassVar[Role]
    IDLE: _ClassVar[Role]

class SlotRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SLOT_ROLE_UNSPECIFIED: _ClassVar[SlotRole]
    SLOT_PRIMARY: _ClassVar[SlotRole]
    SLOT_BACKUP: _ClassVar[SlotRole]
    SLOT_ADOPTING: _ClassVar[SlotRole]
    SLOT_RELEASED: _ClassVar[SlotRole]
    SLOT_REPLICA: _ClassVar[SlotRole]
ROLE_UNSPECIFIED: Role
PRIMARY: Role
BACKUP: Role
IDLE: Role
SLOT_ROLE_UNSPECIFIED: SlotRole
SLOT_PRIMARY: SlotRole
SLOT_BACKUP: SlotRole
SLOT_ADOPTING: SlotRole
SLOT_RELEASED: SlotRole
SLOT_REPLICA: SlotRole

class Result(_message.Message):
    __slots__ = ("ok", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Load(_message.Message):
    __slots__ = ("packet_rate", "queue_depth", "cpu_percent", "drops", "gaps", "packets", "malformed", "duplicates", "repl_errors", "repl_refused", "tx_lost", "global_store_errors", "nf_errors", "overload_drops", "repl_tx_bytes", "repl_rx_bytes", "transfer_tx_bytes", "transfer_rx_bytes", "batches", "kernel_drops", "buffer_overflows", "unowned", "markers", "marker_timeouts", "self_promotions", "heartbeats_withheld", "foreign", "flows", "evictions", "flows_over_bound")
    class ReplTxBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class ReplRxBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class EvictionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PACKET_RATE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    DROPS_FIELD_NUMBER: _ClassVar[int]
    GAPS_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    REPL_ERRORS_FIELD_NUMBER: _ClassVar[int]
    REPL_REFUSED_FIELD_NUMBER: _ClassVar[int]
    TX_LOST_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_STORE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    NF_ERRORS_FIELD_NUMBER: _ClassVar[int]
    OVERLOAD_DROPS_FIELD_NUMBER: _ClassVar[int]
    REPL_TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPL_RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    KERNEL_DROPS_FIELD_NUMBER: _ClassVar[int]
    BUFFER_OVERFLOWS_FIELD_NUMBER: _ClassVar[int]
    UNOWNED_FIELD_NUMBER: _ClassVar[int]
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    MARKER_TIMEOUTS_FIELD_NUMBER: _ClassVar[int]
    SELF_PROMOTIONS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEATS_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    FOREIGN_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    FLOWS_OVER_BOUND_FIELD_NUMBER: _ClassVar[int]
    packet_rate: float
    queue_depth: int
    cpu_percent: float
    drops: int
    gaps: int
    packets: int
    malformed: int
    duplicates: int
    repl_errors: int
    repl_refused: int
    tx_lost: int
    global_store_errors: int
    nf_errors: int
    overload_drops: int
    repl_tx_bytes: _containers.ScalarMap[int, int]
    repl_rx_bytes: _containers.ScalarMap[int, int]
    transfer_tx_bytes: int
    transfer_rx_bytes: int
    batches: int
    kernel_drops: int
    buffer_overflows: int
    unowned: int
    markers: int
    marker_timeouts: int
    self_promotions: int
    heartbeats_withheld: int
    foreign: int
    flows: int
    evictions: _containers.ScalarMap[str, int]
    flows_over_bound: int
    def __init__(self, packet_rate: _Optional[float] = ..., queue_depth: _Optional[int] = ..., cpu_percent: _Optional[float] = ..., drops: _Optional[int] = ..., gaps: _Optional[int] = ..., packets: _Optional[int] = ..., malformed: _Optional[int] = ..., duplicates: _Optional[int] = ..., repl_errors: _Optional[int] = ..., repl_refused: _Optional[int] = ..., tx_lost: _Optional[int] = ..., global_store_errors: _Optional[int] = ..., nf_errors: _Optional[int] = ..., overload_drops: _Optional[int] = ..., repl_tx_bytes: _Optional[_Mapping[int, int]] = ..., repl_rx_bytes: _Optional[_Mapping[int, int]] = ..., transfer_tx_bytes: _Optional[int] = ..., transfer_rx_bytes: _Optional[int] = ..., batches: _Optional[int] = ..., kernel_drops: _Optional[int] = ..., buffer_overflows: _Optional[int] = ..., unowned: _Optional[int] = ..., markers: _Optional[int] = ..., marker_timeouts: _Optional[int] = ..., self_promotions: _Optional[int] = ..., heartbeats_withheld: _Optional[int] = ..., foreign: _Optional[int] = ..., flows: _Optional[int] = ..., evictions: _Optional[_Mapping[str, int]] = ..., flows_over_bound: _Optional[int] = ...) -> None: ...

class SlotStatus(_message.Message):
    __slots__ = ("slot", "epoch", "role", "packets", "committed_seq", "next_expected", "version", "flows", "peer_versions", "highest_seen", "has_seen")
    class PeerVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_EXPECTED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    PEER_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEEN_FIELD_NUMBER: _ClassVar[int]
    HAS_SEEN_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    role: SlotRole
    packets: int
    committed_seq: int
    next_expected: int
    version: int
    flows: int
    peer_versions: _containers.ScalarMap[int, int]
    highest_seen: int
    has_seen: bool
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., role: _Optional[_Union[SlotRole, str]] = ..., packets: _Optional[int] = ..., committed_seq: _Optional[int] = ..., next_expected: _Optional[int] = ..., version: _Optional[int] = ..., flows: _Optional[int] = ..., peer_versions: _Optional[_Mapping[int, int]] = ..., highest_seen: _Optional[int] = ..., has_seen: _Optional[bool] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("nf_id", "role", "cluster", "slots", "load", "nf_type", "workers", "backup_nf_id", "params_json", "took_over_from")
    NF_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    NF_TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    BACKUP_NF_ID_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOK_OVER_FROM_FIELD_NUMBER: _ClassVar[int]
    nf_id: int
    role: Role
    cluster: int
    slots: _containers.RepeatedCompositeFieldContainer[SlotStatus]
    load: Load
    nf_type: str
    workers: int
    backup_nf_id: int
    params_json: str
    took_over_from: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, nf_id: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., cluster: _Optional[int] = ..., slots: _Optional[_Iterable[_Union[SlotStatus, _Mapping]]] = ..., load: _Optional[_Union[Load, _Mapping]] = ..., nf_type: _Optional[str] = ..., workers: _Optional[int] = ..., backup_nf_id: _Optional[int] = ..., params_json: _Optional[str] = ..., took_over_from: _Optional[_Iterable[int]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("counter",)
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    counter: int
    def __init__(self, counter: _Optional[int] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("nf_id", "counter", "uptime_ms")
    NF_ID_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    nf_id: int
    counter: int
    uptime_ms: int
    def __init__(self, nf_id: _Optional[int] = ..., counter: _Optional[int] = ..., uptime_ms: _Optional[int] = ...) -> None: ...

class SetRoleRequest(_message.Message):
    __slots__ = ("role",)
    ROLE_FIELD_NUMBER: _ClassVar[int]
    role: Role
    def __init__(self, role: _Optional[_Union[Role, str]] = ...) -> None: ...

class SetBackupRequest(_message.Message):
    __slots__ = ("backup_nf_id", "address")
    BACKUP_NF_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    backup_nf_id: int
    address: str
    def __init__(self, backup_nf_id: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class Peer(_message.Message):
    __slots__ = ("nf_id", "address")
    NF_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    nf_id: int
    address: str
    def __init__(self, nf_id: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class SetClusterPeersRequest(_message.Message):
    __slots__ = ("peers",)
    PEERS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[Peer]
    def __init__(self, peers: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ...) -> None: ...

class SlotEpoch(_message.Message):
    __slots__ = ("slot", "epoch", "next_seq")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQ_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    next_seq: int
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., next_seq: _Optional[int] = ...) -> None: ...

class AssignSlotsRequest(_message.Message):
    __slots__ = ("slots", "as_backup", "primary_nf_id", "adoption", "adoption_from_nf_id", "adoption_from_address")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    AS_BACKUP_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_NF_ID_FIELD_NUMBER: _ClassVar[int]
    ADOPTION_FIELD_NUMBER: _ClassVar[int]
    ADOPTION_FROM_NF_ID_FIELD_NUMBER: _ClassVar[int]
    ADOPTION_FROM_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedCompositeFieldContainer[SlotEpoch]
    as_backup: bool
    primary_nf_id: int
    adoption: bool
    adoption_from_nf_id: int
    adoption_from_address: str
    def __init__(self, slots: _Optional[_Iterable[_Union[SlotEpoch, _Mapping]]] = ..., as_backup: _Optional[bool] = ..., primary_nf_id: _Optional[int] = ..., adoption: _Optional[bool] = ..., adoption_from_nf_id: _Optional[int] = ..., adoption_from_address: _Optional[str] = ...) -> None: ...

class AdoptRequest(_message.Message):
    __slots__ = ("slot", "epoch", "from_nf_id", "from_address", "copy_nf_id", "copy_address")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FROM_NF_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    COPY_NF_ID_FIELD_NUMBER: _ClassVar[int]
    COPY_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    from_nf_id: int
    from_address: str
    copy_nf_id: int
    copy_address: str
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., from_nf_id: _Optional[int] = ..., from_address: _Optional[str] = ..., copy_nf_id: _Optional[int] = ..., copy_address: _Optional[str] = ...) -> None: ...

class CancelAdoptReply(_message.Message):
    __slots__ = ("ok", "error", "started", "held")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    started: bool
    held: bool
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., started: _Optional[bool] = ..., held: _Optional[bool] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("slot", "to_nf_id", "to_address", "same_cluster", "adopter_backup_nf_id", "adopter_backup_address")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    TO_NF_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SAME_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ADOPTER_BACKUP_NF_ID_FIELD_NUMBER: _ClassVar[int]
    ADOPTER_BACKUP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    slot: int
    to_nf_id: int
    to_address: str
    same_cluster: bool
    adopter_backup_nf_id: int
    adopter_backup_address: str
    def __init__(self, slot: _Optional[int] = ..., to_nf_id: _Optional[int] = ..., to_address: _Optional[str] = ..., same_cluster: _Optional[bool] = ..., adopter_backup_nf_id: _Optional[int] = ..., adopter_backup_address: _Optional[str] = ...) -> None: ...

class ReleaseReply(_message.Message):
    __slots__ = ("ok", "error", "bytes_shipped", "last_seq", "flows_shipped", "delta")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BYTES_SHIPPED_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    FLOWS_SHIPPED_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    bytes_shipped: int
    last_seq: int
    flows_shipped: int
    delta: bool
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., bytes_shipped: _Optional[int] = ..., last_seq: _Optional[int] = ..., flows_shipped: _Optional[int] = ..., delta: _Optional[bool] = ...) -> None: ...

class SwitchRestartedRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetSuccessorRequest(_message.Message):
    __slots__ = ("primary_nf_id", "successor_nf_id", "successor_address")
    PRIMARY_NF_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_NF_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    primary_nf_id: int
    successor_nf_id: int
    successor_address: str
    def __init__(self, primary_nf_id: _Optional[int] = ..., successor_nf_id: _Optional[int] = ..., successor_address: _Optional[str] = ...) -> None: ...

class PromoteRequest(_message.Message):
    __slots__ = ("slots", "dead_nf_id", "backup_nf_id", "backup_address", "epochs", "primary_may_live")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    DEAD_NF_ID_FIELD_NUMBER: _ClassVar[int]
    BACKUP_NF_ID_FIELD_NUMBER: _ClassVar[int]
    BACKUP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_MAY_LIVE_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedScalarFieldContainer[int]
    dead_nf_id: int
    backup_nf_id: int
    backup_address: str
    epochs: _containers.RepeatedScalarFieldContainer[int]
    primary_may_live: bool
    def __init__(self, slots: _Optional[_Iterable[int]] = ..., dead_nf_id: _Optional[int] = ..., backup_nf_id: _Optional[int] = ..., backup_address: _Optional[str] = ..., epochs: _Optional[_Iterable[int]] = ..., primary_may_live: _Optional[bool] = ...) -> None: ...

class PromoteReply(_message.Message):
    __slots__ = ("ok", "error", "replayed", "slots")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    replayed: int
    slots: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., replayed: _Optional[int] = ..., slots: _Optional[_Iterable[int]] = ...) -> None: ...

class DumpSlotRequest(_message.Message):
    __slots__ = ("slot",)
    SLOT_FIELD_NUMBER: _ClassVar[int]
    slot: int
    def __init__(self, slot: _Optional[int] = ...) -> None: ...

class DumpSlotReply(_message.Message):
    __slots__ = ("ok", "error", "version", "last_seq", "flows")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    version: int
    last_seq: int
    flows: bytes
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., version: _Optional[int] = ..., last_seq: _Optional[int] = ..., flows: _Optional[bytes] = ...) -> None: ...

class UpdateNfRequest(_message.Message):
    __slots__ = ("params_json",)
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    params_json: str
    def __init__(self, params_json: _Optional[str] = ...) -> None: ...
