"""AWS Service Quotas' payloads as models: what shoal reads of a ListServiceQuotas or
ListAWSDefaultServiceQuotas page, checked whole (providers/core/payload.py). Imported when a
page is read, never before: it imports pydantic.

Fields as documented (a ServiceQuota's every field is optional there; any key not declared
is ignored, so Unit, ServiceCode, UsageMetric and the rest shoal does not read are not
checked either):
- https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html
  (the same answer as API_ListAWSDefaultServiceQuotas.html)
- https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ServiceQuota.html

A quota's Value is any JSON number here, however large: one no real quota has (negative,
past 1e15, `1e400`) is left out of the snapshot and counted in a note by the reader
(providers/aws/accounts.py), not a failure of the page. NaN and Infinity are no JSON numbers:
the page they are in is refused before it gets here (providers/aws/account_parse.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Required

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema
from typing_extensions import TypedDict

from providers.core.payload import Document, Name


def _as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits: past any quota, as infinity is
        return float("inf") if value > 0 else float("-inf")


class _JsonNumber:
    """A JSON number as a float, never a bool or a string; past a float's range it is an
    infinity (pydantic's parser reads a 400-digit integer so, json.loads as an int)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.union_schema(
            [
                core_schema.float_schema(strict=True, allow_inf_nan=True),
                core_schema.no_info_after_validator_function(
                    _as_float, core_schema.int_schema(strict=True)
                ),
            ],
            custom_error_type="float_type",  # "expected a number, got ..."
        )


Number = Annotated[float, _JsonNumber()]


class ServiceQuota(TypedDict, total=False):
    QuotaCode: Required[Name]  # what a quota is kept under: one without it is no quota
    QuotaName: str | None
    Value: Number | None
    GlobalQuota: bool | None


class QuotaPage(TypedDict, total=False):
    Quotas: list[ServiceQuota]
    NextToken: str | None


QUOTA_PAGE: Document[QuotaPage] = Document("Service Quotas", QuotaPage)
