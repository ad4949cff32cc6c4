from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Payload(_message.Message):
    __slots__ = ("ts", "body")
    TS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ts: int
    body: bytes
    def __init__(self, ts: _Optional[int] = ..., body: _Optional[bytes] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("origin_gear", "origin_region")
    ORIGIN_GEAR_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_REGION_FIELD_NUMBER: _ClassVar[int]
    origin_gear: str
    origin_region: str
    def __init__(self, origin_gear: _Optional[str] = ..., origin_region: _Optional[str] = ...) -> None: ...

class PayloadBatch(_message.Message):
    __slots__ = ("payloads", "through_ts", "sent_at")
    PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    THROUGH_TS_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    payloads: _containers.RepeatedCompositeFieldContainer[Payload]
    through_ts: int
    sent_at: float
    def __init__(self, payloads: _Optional[_Iterable[_Union[Payload, _Mapping]]] = ..., through_ts: _Optional[int] = ..., sent_at: _Optional[float] = ...) -> None: ...

class Position(_message.Message):
    __slots__ = ("through_ts", "heartbeats", "notice")
    THROUGH_TS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    through_ts: int
    heartbeats: bool
    notice: bool
    def __init__(self, through_ts: _Optional[int] = ..., heartbeats: _Optional[bool] = ..., notice: _Optional[bool] = ...) -> None: ...
