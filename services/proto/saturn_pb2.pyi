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
TREE_UPDATE: TreeLabelType
TREE_MIGRATION: TreeLabelType
TREE_HEARTBEAT: TreeLabelType
TREE_GAP: TreeLabelType
TREE_EPOCH: TreeLabelType

class TreeLabel(_message.Message):
    __slots__ = ("type", "src", "ts", "target", "group", "outside_order")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_ORDER_FIELD_NUMBER: _ClassVar[int]
    type: TreeLabelType
    src: str
    ts: int
    target: str
    group: str
    outside_order: bool
    def __init__(self, type: _Optional[_Union[TreeLabelType, str]] = ..., src: _Optional[str] = ..., ts: _Optional[int] = ..., target: _Optional[str] = ..., group: _Optional[str] = ..., outside_order: _Optional[bool] = ...) -> None: ...

class LabelBatch(_message.Message):
    __slots__ = ("labels",)
    LABELS_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedCompositeFieldContainer[TreeLabel]
    def __init__(self, labels: _Optional[_Iterable[_Union[TreeLabel, _Mapping]]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("node", "epoch")
    NODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    node: str
    epoch: int
    def __init__(self, node: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class TreeMessage(_message.Message):
    __slots__ = ("hello", "batch")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    batch: LabelBatch
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., batch: _Optional[_Union[LabelBatch, _Mapping]] = ...) -> None: ...

class DeliverReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
