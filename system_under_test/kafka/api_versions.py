"""ApiVersions (key 18), versions 0-2: which APIs and versions a broker speaks.

A broker that gets an ApiVersions request of a version it does not know answers, as Kafka
does, with a version 0 response carrying UNSUPPORTED_VERSION and its supported ranges, so
the client can retry with a version both know (``unsupported_version_answer``).
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.errors import ErrorCode
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import INT16, INT32, Body, array_of, field, struct


@struct
class ApiVersionsRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.API_VERSIONS
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)


@struct
class ApiVersion:
    api_key: int = field(INT16)
    min_version: int = field(INT16)
    max_version: int = field(INT16)


@struct
class ApiVersionsResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.API_VERSIONS
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    error_code: int = field(INT16)
    api_keys: list[ApiVersion] = field(array_of(ApiVersion))
    throttle_time_ms: int = field(INT32, "1+", default=0, ignorable=True)


def unsupported_version_answer(api_keys: list[ApiVersion]) -> ApiVersionsResponse:
    """Kafka's answer to an ApiVersions request of an unknown version (send it as version 0)."""
    return ApiVersionsResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION), api_keys=api_keys)
