"""GCP payloads in their documented wire formats, and a loopback API that serves them.

Formats, from the providers' own documentation:
- SKUs: https://cloud.google.com/billing/v1/how-tos/catalog-api and
  https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list
  (`skus[]`, `nextPageToken`; Money `units` is an int64 so a JSON string, `nanos` an int;
  5000 SKUs a page at most).
- Errors: Google's JSON error shape `{"error": {"code", "message", "status", "details"}}`;
  a bad key is 400 INVALID_ARGUMENT with reason API_KEY_INVALID, no key 403
  PERMISSION_DENIED.
- Machine types: https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes
  /aggregatedList (`items` keyed `zones/<zone>` -> `machineTypes[]` or `warning`).
- Regions: https://cloud.google.com/compute/docs/reference/rest/v1/regions/list.
- SKU wording (spot "Spot Preemptible ...", GPUs "... attached to Spot Preemptible VMs",
  flex-start "DWS Defined Duration ..."): https://cloud.google.com/billing/docs/how-to/
  get-pricing-information-api and catalog excerpts quoted in public projects.
"""

from __future__ import annotations

from typing import Any

from tests.providers.apiserver import ApiServer, Reply

SKUS_PATH = "/v1/services/6F81-5844-456A/skus"
PROJECT = "proj-1"
MACHINE_TYPES_PATH = f"/compute/v1/projects/{PROJECT}/aggregated/machineTypes"
REGIONS_PATH = f"/compute/v1/projects/{PROJECT}/regions"
API_KEY = "AIzaSy-test-key-123"
TOKEN = "ya29.test-token-456"

AMERICAS = ["us-central1", "us-east1"]
BELGIUM = ["europe-west1"]

_counter = iter(range(1, 1_000_000))


def money(price: float, currency: str = "USD") -> dict[str, Any]:
    units = int(price)
    nanos = round((price - units) * 1e9)
    out: dict[str, Any] = {"currencyCode": currency, "units": str(units)}
    if nanos:  # proto3 JSON leaves zero values out
        out["nanos"] = nanos
    return out


def sku(
    description: str,
    price: float,
    *,
    usage: str = "OnDemand",
    group: str = "CPU",
    unit: str = "h",
    regions: list[str] | None = None,
    family: str = "Compute",
    currency: str = "USD",
    tiers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    sku_id = f"{next(_counter):04X}-AAAA-BBBB"
    return {
        "name": f"services/6F81-5844-456A/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {
            "serviceDisplayName": "Compute Engine",
            "resourceFamily": family,
            "resourceGroup": group,
            "usageType": usage,
        },
        "serviceRegions": AMERICAS if regions is None else regions,
        "pricingInfo": [
            {
                "summary": "",
                "pricingExpression": {
                    "usageUnit": unit,
                    "displayQuantity": 1,
                    "tieredRates": tiers
                    or [{"startUsageAmount": 0, "unitPrice": money(price, currency)}],
                    "usageUnitDescription": "hour",
                    "baseUnit": "s",
                    "baseUnitConversionFactor": 3600,
                },
                "aggregationInfo": {
                    "aggregationLevel": "ACCOUNT",
                    "aggregationInterval": "DAILY",
                    "aggregationCount": 1,
                },
                "currencyConversionRate": 1,
                "effectiveTime": "2026-07-01T10:00:00.000Z",
            }
        ],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": AMERICAS},
        "someFutureField": {"ignored": True},
    }


def core(desc: str, price: float, **kw: Any) -> dict[str, Any]:
    return sku(desc, price, group=kw.pop("group", "CPU"), unit="h", **kw)


def ram(desc: str, price: float, **kw: Any) -> dict[str, Any]:
    return sku(desc, price, group=kw.pop("group", "RAM"), unit="GiBy.h", **kw)


def gpu(desc: str, price: float, **kw: Any) -> dict[str, Any]:
    return sku(desc, price, group="GPU", unit="h", **kw)


# Real us-central1 list prices (per vCPU-hour, GiB-hour, GPU-hour) where known.
N2_CORE, N2_RAM = 0.031611, 0.004237
N2_SPOT_CORE, N2_SPOT_RAM = 0.007702, 0.001032
A2_CORE, A2_RAM, A100 = 0.031611, 0.004237, 2.933908
A2_SPOT_CORE, A2_SPOT_RAM, A100_SPOT = 0.01659, 0.00222, 1.5399
A2_DWS_CORE, A2_DWS_RAM, A100_DWS = 0.017390, 0.002330, 1.613650
E2_CORE, E2_RAM = 0.021811, 0.002923
G2_CORE, G2_RAM, L4 = 0.024988, 0.002927, 0.560040
A3_CORE, A3_RAM, H100 = 0.029563, 0.002965, 11.0612
N1_CORE, N1_RAM, T4 = 0.031611, 0.004237, 0.35
BE_N2_CORE, BE_N2_RAM = 0.034806, 0.004664


def catalog() -> list[dict[str, Any]]:
    """A Compute Engine SKU list: on-demand, Spot, commitments, DWS, GPUs, licences."""
    return [
        core("N2 Instance Core running in Americas", N2_CORE, group="N2Standard"),
        ram("N2 Instance Ram running in Americas", N2_RAM, group="N2Standard"),
        core(
            "Spot Preemptible N2 Instance Core running in Americas",
            N2_SPOT_CORE,
            usage="Preemptible",
            group="N2Standard",
        ),
        ram(
            "Spot Preemptible N2 Instance Ram running in Americas",
            N2_SPOT_RAM,
            usage="Preemptible",
            group="N2Standard",
        ),
        core("Commitment v1: N2 Cpu in Americas for 1 Year", 0.019915, usage="Commit1Yr"),
        ram("Commitment v1: N2 Ram in Americas for 3 Year", 0.001, usage="Commit3Yr"),
        core("N2 Custom Instance Core running in Americas", 0.9, group="N2Custom"),
        ram("N2 Custom Extended Instance Ram running in Americas", 0.9),
        core("N2 Sole Tenancy Instance Core running in Americas", 0.9),
        core("N2 Instance Core running in Belgium", BE_N2_CORE, regions=BELGIUM),
        ram("N2 Instance Ram running in Belgium", BE_N2_RAM, regions=BELGIUM),
        core("A2 Instance Core running in Americas", A2_CORE),
        ram("A2 Instance Ram running in Americas", A2_RAM),
        core(
            "Spot Preemptible A2 Instance Core running in Americas",
            A2_SPOT_CORE,
            usage="Preemptible",
        ),
        ram(
            "Spot Preemptible A2 Instance Ram running in Americas", A2_SPOT_RAM, usage="Preemptible"
        ),
        core("DWS Defined Duration A2 Core running in Americas", A2_DWS_CORE),
        ram("DWS Defined Duration A2 Ram running in Americas", A2_DWS_RAM),
        gpu("Nvidia Tesla A100 GPU running in Americas", A100),
        gpu(
            "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas",
            A100_SPOT,
            usage="Preemptible",
        ),
        gpu(
            "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas",
            A100_DWS,
        ),
        gpu(
            "Commitment v1: Nvidia Tesla A100 GPU running in Americas for 1 Year",
            1.8,
            usage="Commit1Yr",
        ),
        gpu("Reserved Nvidia Tesla A100 80GB GPU in Virginia", 0.0, regions=["us-east4"]),
        core("E2 Instance Core running in Americas", E2_CORE),
        ram("E2 Instance Ram running in Americas", E2_RAM),
        core("G2 Instance Core running in Americas", G2_CORE, group="G2Standard"),
        ram("G2 Instance Ram running in Americas", G2_RAM, group="G2Standard"),
        gpu("Nvidia L4 GPU running in Americas", L4),
        core("A3 Instance Core running in Americas", A3_CORE),
        ram("A3 Instance Ram running in Americas", A3_RAM),
        gpu("Nvidia H100 80GB GPU running in Americas", H100),
        core("N1 Predefined Instance Core running in Americas", N1_CORE, group="N1Standard"),
        ram("N1 Predefined Instance Ram running in Americas", N1_RAM, group="N1Standard"),
        gpu("Nvidia Tesla T4 GPU running in Americas", T4),
        gpu("Nvidia Tesla T4 Virtual Workstation GPU running in Americas", 0.55),
        core(
            "Licensing Fee for Windows Server 2022 on VM with 1 to 4 VCPU",
            0.04,
            family="License",
            regions=["global"],
        ),
        core("Licensing Fee for SLES (CPU cost)", 0.02),
        sku(
            "Network Internet Egress from Americas to EMEA",
            0.12,
            group="PremiumInternetEgress",
            unit="GiBy",
            family="Network",
        ),
        sku(
            "Storage PD Capacity in Iowa",
            0.04,
            group="PDStandard",
            unit="GiBy.mo",
            family="Storage",
            regions=["us-central1"],
        ),
        core("C3 Instance Core running in Iowa", 0.0, regions=["us-central1"]),
    ]


def pages(items: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def error(code: int, status: str, message: str, reason: str = "") -> Reply:
    body: dict[str, Any] = {"error": {"code": code, "message": message, "status": status}}
    if reason:
        body["error"]["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
                "metadata": {"service": "cloudbilling.googleapis.com"},
            }
        ]
    return Reply.json(body, code)


def skus_handler(chunks: list[list[dict[str, Any]]]) -> Any:
    """Pages the SKU list with opaque tokens and checks the key as the API does."""

    def handle(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        key = query.get("key", [""])[0]
        if not key:
            return error(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established "
                "identity). Please use API Key or other form of API consumer identity to "
                "call this API.",
            )
        if key == "blocked-key":
            return error(
                403,
                "PERMISSION_DENIED",
                "Requests to this API cloudbilling.googleapis.com method "
                "google.cloud.billing.v1.CloudCatalog.ListSkus are blocked.",
                "API_KEY_SERVICE_BLOCKED",
            )
        if key != API_KEY:
            return error(
                400,
                "INVALID_ARGUMENT",
                f"API key not valid. Please pass a valid API key. ({key})",
                "API_KEY_INVALID",
            )
        assert query.get("currencyCode") == ["USD"]
        assert query.get("pageSize") == ["5000"]
        token = query.get("pageToken", [""])[0]
        index = int(token.removeprefix("tok-")) if token else 0
        nxt = f"tok-{index + 1}" if index + 1 < len(chunks) else ""
        return Reply.json({"skus": chunks[index], "nextPageToken": nxt})

    return handle


def machine_type(
    name: str, cpus: int, memory_mb: int, zone: str, accel: str = "", count: int = 0
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "kind": "compute#machineType",
        "id": "801016",
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name,
        "description": f"{cpus} vCPUs",
        "guestCpus": cpus,
        "memoryMb": memory_mb,
        "imageSpaceGb": 0,
        "maximumPersistentDisks": 128,
        "maximumPersistentDisksSizeGb": "263168",
        "zone": zone,
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}"
        f"/machineTypes/{name}",
        "isSharedCpu": False,
        "architecture": "X86_64",
    }
    if accel:
        item["accelerators"] = [{"guestAcceleratorType": accel, "guestAcceleratorCount": count}]
    return item


def machine_type_pages() -> list[dict[str, Any]]:
    return [
        {
            "kind": "compute#machineTypeAggregatedList",
            "items": {
                "zones/us-central1-a": {
                    "machineTypes": [
                        machine_type("n2-standard-4", 4, 16384, "us-central1-a"),
                        machine_type(
                            "a2-highgpu-1g", 12, 87040, "us-central1-a", "nvidia-tesla-a100", 1
                        ),
                    ]
                },
                "zones/us-central1-b": {
                    "machineTypes": [
                        machine_type("n2-standard-4", 4, 16384, "us-central1-b"),
                        machine_type("c3-standard-4", 4, 16384, "us-central1-b"),
                    ]
                },
                "zones/us-central1-z": {
                    "warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": "There are no results for scope 'zones/us-central1-z'.",
                        "data": [{"key": "scope", "value": "zones/us-central1-z"}],
                    }
                },
            },
            "nextPageToken": "mt-2",
            "selfLink": "ignored",
        },
        {
            "kind": "compute#machineTypeAggregatedList",
            "items": {
                "zones/us-central1-c": {
                    "machineTypes": [
                        machine_type("g2-standard-8", 8, 32768, "us-central1-c", "nvidia-l4", 1),
                    ]
                },
                "zones/europe-west1-b": {
                    "machineTypes": [machine_type("n2-standard-8", 8, 32768, "europe-west1-b")]
                },
            },
        },
    ]


def compute_handler(pages_: list[dict[str, Any]]) -> Any:
    def handle(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return error(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access "
                "token, login cookie or other valid authentication credential.",
            )
        token = query.get("pageToken", [""])[0]
        return Reply.json(pages_[1] if token == "mt-2" else pages_[0])

    return handle


def regions_page() -> dict[str, Any]:
    zone = "https://www.googleapis.com/compute/v1/projects/proj-1/zones/"
    return {
        "kind": "compute#regionList",
        "items": [
            {
                "kind": "compute#region",
                "name": "us-central1",
                "status": "UP",
                "zones": [zone + "us-central1-b", zone + "us-central1-a", zone + "us-central1-c"],
            },
            {"kind": "compute#region", "name": "europe-west1", "zones": [zone + "europe-west1-b"]},
        ],
    }


def serve(server: ApiServer, page_size: int = 7, items: list[dict[str, Any]] | None = None) -> None:
    """(Re)set the GCP routes on `server`, with no queued faults and no recorded requests."""
    server.reset()
    chunks = pages(catalog() if items is None else items, page_size)
    server.route(SKUS_PATH, skus_handler(chunks))
    server.route(MACHINE_TYPES_PATH, compute_handler(machine_type_pages()))
    server.route(REGIONS_PATH, compute_handler([regions_page()]))
