from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TreeLabelType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TREE_UPDATE: _ClassVar[TreeLabelType]
    TREE_MIGRATION: _ClassVar[TreeLabelType]
    TREE_HEARTBEAT: _ClassVar[TreeLabelType]
    TREE_GAP: _ClassVar[TreeLabelType]
    TREE_EPOCH: _ClassVar[TreeLabelType]
    TREE_ATTACH: _ClassVar[TreeLabelType]
TREE_UPDATE: TreeLabelType
TREE_MIGRATION: TreeLabelType
TREE_HEARTBEAT: TreeLabelType
TREE_GAP: TreeLabelType
TREE_EPOCH: TreeLabelType
TREE_ATTACH: TreeLabelType

class TreeLabel(_message.Message):
    __slots__ = ("type", "src", "ts", "target", "group", "outside_order", "deps")
    class DepsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_ORDER_FIELD_NUMBER: _ClassVar[int]
    DEPS_FIELD_NUMBER: _ClassVar[int]
    type: TreeLabelType
    src: str
    ts: int
    target: str
    group: str
    outside_order: bool
    deps: _containers.ScalarMap[str, int]
    def __init__(self, type: _Optional[_Union[TreeLabelType, str]] = ..., src: _Optional[str] = ..., ts: _Optional[int] = ..., target: _Optional[str] = ..., group: _Optional[str] = ..., outside_order: _Optional[bool] = ..., deps: _Optional[_Mapping[str, int]] = ...) -> None: ...

class LabelBatch(_message.Message):
    __slots__ = ("labels", "seq")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedCompositeFieldContainer[TreeLabel]
    seq: int
    def __init__(self, labels: _Optional[_Iterable[_Union[TreeLabel, _Mapping]]] = ..., seq: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("node", "epoch", "resumable", "incarnation")
    NODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESUMABLE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    node: str
    epoch: int
    resumable: bool
    incarnation: str
    def __init__(self, node: _Optional[str] = ..., epoch: _Optional[int] = ..., resumable: _Optional[bool] = ..., incarnation: _Optional[str] = ...) -> None: ...

class LinkAccepted(_message.Message):
    __slots__ = ("last_seq",)
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    last_seq: int
    def __init__(self, last_seq: _Optional[int] = ...) -> None: ...

class LogEntry(_message.Message):
    __slots__ = ("pos", "source", "source_incarnation", "source_seq", "batch")
    POS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    pos: int
    source: str
    source_incarnation: str
    source_seq: int
    batch: LabelBatch
    def __init__(self, pos: _Optional[int] = ..., source: _Optional[str] = ..., source_incarnation: _Optional[str] = ..., source_seq: _Optional[int] = ..., batch: _Optional[_Union[LabelBatch, _Mapping]] = ...) -> None: ...

class SourcePosition(_message.Message):
    __slots__ = ("source", "incarnation", "seq")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    source: str
    incarnation: str
    seq: int
    def __init__(self, source: _Optional[str] = ..., incarnation: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class FollowStart(_message.Message):
    __slots__ = ("log_id", "next_pos", "sources")
    LOG_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_POS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    log_id: str
    next_pos: int
    sources: _containers.RepeatedCompositeFieldContainer[SourcePosition]
    def __init__(self, log_id: _Optional[str] = ..., next_pos: _Optional[int] = ..., sources: _Optional[_Iterable[_Union[SourcePosition, _Mapping]]] = ...) -> None: ...

class FollowRequest(_message.Message):
    __slots__ = ("replica", "acked")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    replica: int
    acked: int
    def __init__(self, replica: _Optional[int] = ..., acked: _Optional[int] = ...) -> None: ...

class RoleReply(_message.Message):
    __slots__ = ("primary", "next_pos", "holds_log")
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    NEXT_POS_FIELD_NUMBER: _ClassVar[int]
    HOLDS_LOG_FIELD_NUMBER: _ClassVar[int]
    primary: bool
    next_pos: int
    holds_log: bool
    def __init__(self, primary: _Optional[bool] = ..., next_pos: _Optional[int] = ..., holds_log: _Optional[bool] = ...) -> None: ...
