from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LabelType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LABEL_UPDATE: _ClassVar[LabelType]
    LABEL_MIGRATION: _ClassVar[LabelType]
LABEL_UPDATE: LabelType
LABEL_MIGRATION: LabelType

class Label(_message.Message):
    __slots__ = ("type", "src", "ts", "target", "vector")
    class VectorEntry(_message.Message):
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
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    type: LabelType
    src: str
    ts: int
    target: str
    vector: _containers.ScalarMap[str, int]
    def __init__(self, type: _Optional[_Union[LabelType, str]] = ..., src: _Optional[str] = ..., ts: _Optional[int] = ..., target: _Optional[str] = ..., vector: _Optional[_Mapping[str, int]] = ...) -> None: ...

class Cell(_message.Message):
    __slots__ = ("column", "value", "label", "is_counter", "counter")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    IS_COUNTER_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    column: str
    value: bytes
    label: Label
    is_counter: bool
    counter: int
    def __init__(self, column: _Optional[str] = ..., value: _Optional[bytes] = ..., label: _Optional[_Union[Label, _Mapping]] = ..., is_counter: _Optional[bool] = ..., counter: _Optional[int] = ...) -> None: ...

class Slice(_message.Message):
    __slots__ = ("after", "limit", "reverse")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REVERSE_FIELD_NUMBER: _ClassVar[int]
    after: str
    limit: int
    reverse: bool
    def __init__(self, after: _Optional[str] = ..., limit: _Optional[int] = ..., reverse: _Optional[bool] = ...) -> None: ...

class ReadOp(_message.Message):
    __slots__ = ("group", "row", "columns", "slice")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    SLICE_FIELD_NUMBER: _ClassVar[int]
    group: str
    row: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    slice: Slice
    def __init__(self, group: _Optional[str] = ..., row: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., slice: _Optional[_Union[Slice, _Mapping]] = ...) -> None: ...

class RowResult(_message.Message):
    __slots__ = ("group", "row", "cells", "next_cursor", "size")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    group: str
    row: str
    cells: _containers.RepeatedCompositeFieldContainer[Cell]
    next_cursor: str
    size: int
    def __init__(self, group: _Optional[str] = ..., row: _Optional[str] = ..., cells: _Optional[_Iterable[_Union[Cell, _Mapping]]] = ..., next_cursor: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class ColumnOp(_message.Message):
    __slots__ = ("column", "set", "delete", "increment")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    INCREMENT_FIELD_NUMBER: _ClassVar[int]
    column: str
    set: bytes
    delete: bool
    increment: int
    def __init__(self, column: _Optional[str] = ..., set: _Optional[bytes] = ..., delete: _Optional[bool] = ..., increment: _Optional[int] = ...) -> None: ...

class Mutation(_message.Message):
    __slots__ = ("group", "row", "ops")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    group: str
    row: str
    ops: _containers.RepeatedCompositeFieldContainer[ColumnOp]
    def __init__(self, group: _Optional[str] = ..., row: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[ColumnOp, _Mapping]]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("label", "op", "floor")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    label: Label
    op: ReadOp
    floor: int
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., op: _Optional[_Union[ReadOp, _Mapping]] = ..., floor: _Optional[int] = ...) -> None: ...

class ReadReply(_message.Message):
    __slots__ = ("label", "row", "floor")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    label: Label
    row: RowResult
    floor: int
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., row: _Optional[_Union[RowResult, _Mapping]] = ..., floor: _Optional[int] = ...) -> None: ...

class MultiReadRequest(_message.Message):
    __slots__ = ("label", "ops", "floor")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    label: Label
    ops: _containers.RepeatedCompositeFieldContainer[ReadOp]
    floor: int
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[ReadOp, _Mapping]]] = ..., floor: _Optional[int] = ...) -> None: ...

class MultiReadReply(_message.Message):
    __slots__ = ("label", "rows", "floor")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    label: Label
    rows: _containers.RepeatedCompositeFieldContainer[RowResult]
    floor: int
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[RowResult, _Mapping]]] = ..., floor: _Optional[int] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("label", "mutation")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    label: Label
    mutation: Mutation
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., mutation: _Optional[_Union[Mutation, _Mapping]] = ...) -> None: ...

class BatchRequest(_message.Message):
    __slots__ = ("label", "mutations", "not_atomic")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    NOT_ATOMIC_FIELD_NUMBER: _ClassVar[int]
    label: Label
    mutations: _containers.RepeatedCompositeFieldContainer[Mutation]
    not_atomic: bool
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., mutations: _Optional[_Iterable[_Union[Mutation, _Mapping]]] = ..., not_atomic: _Optional[bool] = ...) -> None: ...

class WriteReply(_message.Message):
    __slots__ = ("label",)
    LABEL_FIELD_NUMBER: _ClassVar[int]
    label: Label
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("label",)
    LABEL_FIELD_NUMBER: _ClassVar[int]
    label: Label
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ...) -> None: ...

class AttachReply(_message.Message):
    __slots__ = ("label", "region")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    label: Label
    region: str
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., region: _Optional[str] = ...) -> None: ...

class MigrateRequest(_message.Message):
    __slots__ = ("label", "target_region")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    TARGET_REGION_FIELD_NUMBER: _ClassVar[int]
    label: Label
    target_region: str
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ..., target_region: _Optional[str] = ...) -> None: ...

class MigrateReply(_message.Message):
    __slots__ = ("label",)
    LABEL_FIELD_NUMBER: _ClassVar[int]
    label: Label
    def __init__(self, label: _Optional[_Union[Label, _Mapping]] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ("namespace", "key", "holder", "release")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    holder: str
    release: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., holder: _Optional[str] = ..., release: _Optional[bool] = ...) -> None: ...

class ClaimReply(_message.Message):
    __slots__ = ("granted", "holder")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    holder: str
    def __init__(self, granted: _Optional[bool] = ..., holder: _Optional[str] = ...) -> None: ...

class RegionInfo(_message.Message):
    __slots__ = ("name", "site", "endpoint")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    name: str
    site: str
    endpoint: str
    def __init__(self, name: _Optional[str] = ..., site: _Optional[str] = ..., endpoint: _Optional[str] = ...) -> None: ...

class GroupInfo(_message.Message):
    __slots__ = ("name", "regions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    regions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., regions: _Optional[_Iterable[str]] = ...) -> None: ...

class SiteLatency(_message.Message):
    __slots__ = ("from_site", "to_site", "one_way_ms")
    FROM_SITE_FIELD_NUMBER: _ClassVar[int]
    TO_SITE_FIELD_NUMBER: _ClassVar[int]
    ONE_WAY_MS_FIELD_NUMBER: _ClassVar[int]
    from_site: str
    to_site: str
    one_way_ms: float
    def __init__(self, from_site: _Optional[str] = ..., to_site: _Optional[str] = ..., one_way_ms: _Optional[float] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeReply(_message.Message):
    __slots__ = ("region", "protocol", "regions", "groups", "latencies", "max_value_bytes", "vectors")
    REGION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    LATENCIES_FIELD_NUMBER: _ClassVar[int]
    MAX_VALUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    region: str
    protocol: str
    regions: _containers.RepeatedCompositeFieldContainer[RegionInfo]
    groups: _containers.RepeatedCompositeFieldContainer[GroupInfo]
    latencies: _containers.RepeatedCompositeFieldContainer[SiteLatency]
    max_value_bytes: int
    vectors: bool
    def __init__(self, region: _Optional[str] = ..., protocol: _Optional[str] = ..., regions: _Optional[_Iterable[_Union[RegionInfo, _Mapping]]] = ..., groups: _Optional[_Iterable[_Union[GroupInfo, _Mapping]]] = ..., latencies: _Optional[_Iterable[_Union[SiteLatency, _Mapping]]] = ..., max_value_bytes: _Optional[int] = ..., vectors: _Optional[bool] = ...) -> None: ...
