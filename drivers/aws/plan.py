"""What an allocation of one definition takes on EC2, worked out once per run: its options
checked (nothing secret goes onto an instance), the image resolved (an `ssm:` parameter
read, its architecture and root device asked: DescribeImages), the instance type chosen
(drivers/vm/choice.py: the types `-o instance_type` names, priced from the catalog or
asked of EC2, each refused before launch when the image is of another architecture; or
the cheapest in the region's price catalog that fits) and a spot `max_price` held against
the current spot price.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drivers.aws.config import _AMI, AwsConfig, AwsOptions
from drivers.aws.ec2 import ApiError, Ec2, TypeShape, arch_of
from drivers.definitions.options import parse_options
from drivers.vm import choice
from providers.core.errors import ShoalError, UsageError, is_secret_name

if TYPE_CHECKING:
    from drivers.spec.types import LabelDefinition
    from drivers.vm.choice import Choice
    from providers.cloud.catalog import CloudCatalog
    from providers.core.ttlcache import TtlCache
    from providers.models import ResourcePricing

SECRET_FIX = (
    "user-data and tags are readable by anyone who may describe the instance, and by every "
    "process on it; give the instance a role (instance_profile) and read secrets at boot "
    "(e.g. from SSM Parameter Store)"
)
SHAPE_TTL_SECONDS = 24 * 3600.0  # what EC2 says of a type and where it is offered: rarely changes


@dataclass
class Plan:
    """What an allocation of one definition takes: resolved once per run."""

    region: str
    opts: AwsOptions
    image: str  # the AMI id
    image_source: str  # where it came from, for messages: options.image, config image
    image_arch: str
    root_device: str
    choice: Choice
    spot: bool
    fallback: str
    capacity: dict[str, Any] = field(default_factory=dict)


def options(definition: LabelDefinition, cfg: AwsConfig, driver: str) -> AwsOptions:
    opts = parse_options(AwsOptions, definition.options)
    opts.image = opts.image or cfg.image
    if not opts.image:
        raise UsageError(
            "options.image: required, the AMI to boot; e.g. -o image=ami-0123456789abcdef0 "
            "or -o image=ssm:/aws/service/ami-amazon-linux-latest/"
            f'al2023-ami-kernel-default-x86_64 (or set image in [drivers."{driver}"])'
        )
    return opts


def validate(definition: LabelDefinition, cfg: AwsConfig, driver: str) -> None:
    opts = options(definition, cfg, driver)
    if definition.authentication is not None:
        raise UsageError(
            f"authentication: the aws driver puts nothing secret on an instance: {SECRET_FIX}; "
            "for ssh, name an EC2 key pair with key_name in the driver's config"
        )
    if definition.resources.disks:
        raise UsageError("resources.disks: the aws driver takes -o root_disk_gib=N instead")
    for name in opts.env:
        refuse_secret(f"options.env.{name}", name)
    spot = cfg.spot if opts.spot is None else opts.spot
    if opts.max_price is not None and not spot:
        raise UsageError("options.max_price: a spot price limit; add -o spot=true")


def refuse_secret(where: str, name: str) -> None:
    if is_secret_name(name):
        raise UsageError(f"{where}: looks like a credential; {SECRET_FIX}")


def make_plan(
    definition: LabelDefinition,
    opts: AwsOptions,
    ec2: Ec2,
    *,
    cfg: AwsConfig,
    driver: str,
    catalog: Callable[[], CloudCatalog],
    memo: TtlCache,
) -> Plan:
    """The plan in `ec2`'s region. `catalog` is called only once the image is known good:
    a definition at fault is told so before the price catalog is opened."""
    region = ec2.region
    source = "options.image" if definition.options.get("image") else (
        f'[drivers."{driver}"] image'
    )  # fmt: skip
    image = image_id(ec2, opts.image, source)
    names = [opts.instance_type] if isinstance(opts.instance_type, str) else opts.instance_type
    # The image's architecture, also for a named type: one of another is refused here, not
    # by RunInstances.
    arch, root_device = image_facts(ec2, image, source)
    spot = cfg.spot if opts.spot is None else opts.spot
    wanted_gpus = opts.gpus or (1 if opts.gpu else 0)
    want = choice.Want(
        cpu=definition.resources.cpu,
        ram=definition.resources.ram,
        gpus=wanted_gpus,
        gpu=opts.gpu,
        spot=spot,
        max_price=opts.max_price,
        arch=arch,
        allowed=tuple(cfg.allowed_types if opts.allowed_types is None else opts.allowed_types),
    )
    if names:
        shapes, prices = named_types(ec2, names, catalog(), memo)
        chosen = choice.named(region, names, dict(shapes), prices, want)
    else:
        chosen = choice.from_catalog(pricing(catalog(), region, driver), want)
    if spot and opts.max_price is not None:
        check_spot_price(ec2, chosen.first.name, opts.max_price, cfg.zones)
    return Plan(
        region=region,
        opts=opts,
        image=image,
        image_source=source,
        image_arch=arch,
        root_device=root_device,
        choice=chosen,
        spot=spot,
        fallback=opts.fallback or cfg.fallback,
    )


def image_id(ec2: Ec2, ref: str, source: str) -> str:
    """An AMI id as given, or the one an SSM parameter holds (`ssm:/aws/service/...`)."""
    if not ref.startswith("ssm:"):
        return ref
    path = ref.removeprefix("ssm:")
    try:
        value = ec2.ssm_parameter(path)
    except ApiError as exc:
        raise UsageError(
            f"{source}: SSM parameter {path} in {ec2.region}: {exc.code}: {exc.detail} (a "
            "public AMI "
            "parameter looks like /aws/service/ami-amazon-linux-latest/"
            "al2023-ami-kernel-default-x86_64)"
        ) from None
    if not _AMI.match(value):
        raise UsageError(f"{source}: SSM parameter {path} holds no AMI id ({value[:40]!r})")
    return value


def image_facts(ec2: Ec2, image: str, source: str) -> tuple[str, str]:
    """(architecture, root device name) of the AMI; one EC2 does not know is a UsageError."""
    try:
        found = ec2.image(image)
    except ApiError as exc:
        raise UsageError(f"{source}: {image} in {ec2.region}: {exc.code}: {exc.detail}") from None
    if found is None:
        raise UsageError(f"{source}: {image} does not exist in {ec2.region} (DescribeImages)")
    if found.state and found.state != "available":
        raise UsageError(f"{source}: {image} is {found.state}, not available")
    return arch_of(found.arch), found.root_device


def pricing(catalog: CloudCatalog, region: str, driver: str) -> ResourcePricing:
    """The region's prices and shapes from the price catalog (refreshed when stale)."""
    from providers.models import RegionSpec, ResourceListOptions

    pricings = catalog.list_pricing(ResourceListOptions(region=RegionSpec(name=region)))
    if not pricings:
        raise ShoalError(f"{driver}: the aws price catalog has nothing for {region}")
    return pricings[0]


def named_types(
    ec2: Ec2, names: Sequence[str], catalog: CloudCatalog, memo: TtlCache
) -> tuple[dict[str, TypeShape], dict[str, tuple[float | None, float | None]]]:
    """Shapes and (on-demand, spot) prices of the types `-o instance_type` names: from the
    region's cached price catalog when it lists them, else from EC2 (DescribeInstanceTypes
    and DescribeInstanceTypeOfferings, remembered for a day). A type EC2 does not know, or
    the region does not offer, is a UsageError naming it."""
    region = ec2.region
    cache = catalog.cache
    offers = {}
    if region in cache.snapshots("aws"):
        offers = {
            o.instance_type: o for o in cache.offers("aws", region) if o.instance_type in names
        }
    shapes: dict[str, TypeShape] = {}
    prices: dict[str, tuple[float | None, float | None]] = {}
    unknown = []
    for name in names:
        offer = offers.get(name)
        if offer is not None:
            shapes[name] = TypeShape(
                name, offer.vcpus, offer.memory_gib, offer.arch, offer.gpu,
                offer.gpu_count, offer.gpu_memory_gib,
            )  # fmt: skip
            prices[name] = (offer.on_demand, offer.spot)
            continue
        kept = memo.get("shapes", name)
        if isinstance(kept, dict) and memo.get("offered", f"{region}/{name}"):
            shapes[name] = TypeShape(**kept)
        else:
            unknown.append(name)
    if unknown:
        try:
            found = ec2.instance_types(unknown)
        except ApiError as exc:
            raise UsageError(f"options.instance_type: {exc.code}: {exc.detail}") from None
        for name in unknown:
            if name not in found:
                raise UsageError(f"options.instance_type: {name} is not an EC2 instance type")
        offered = ec2.offered(unknown)
        for name in unknown:
            if name not in offered:
                raise UsageError(
                    f"options.instance_type: {name} is not offered in {region}; pick another "
                    "type or region (`shoal types -p aws -r REGION` lists them)"
                )
            shapes[name] = found[name]
            memo.put("shapes", name, found[name].to_json(), SHAPE_TTL_SECONDS)
            memo.put("offered", f"{region}/{name}", True, SHAPE_TTL_SECONDS)
    return shapes, prices


def check_spot_price(ec2: Ec2, instance_type: str, max_price: float, zones: Sequence[str]) -> None:
    """A `max_price` below the current spot price in every zone the driver may use is a
    UsageError now rather than a refused launch."""
    allowed = set(zones)
    prices = {
        z: p for z, p in ec2.spot_prices(instance_type).items() if not allowed or z in allowed
    }
    if not prices:
        return  # no price known: EC2 decides at launch
    zone, lowest = min(prices.items(), key=lambda item: (item[1], item[0]))
    if max_price < lowest:
        raise UsageError(
            f"options.max_price: {max_price:g} USD/h is below the current spot price of "
            f"{instance_type} in {ec2.region}: {lowest:g} USD/h (lowest, in {zone}); raise "
            "it, or drop it to pay up to the on-demand price"
        )


def explain(plan: Plan) -> dict[str, Any]:
    """The type chosen, its price, why the cheaper ones were skipped, the image and the
    account's quota (`alloc --dry-run`)."""
    out = plan.choice.to_json()
    out["image"] = plan.image
    if plan.image_arch:
        out["image_arch"] = plan.image_arch
    if plan.capacity:
        out["capacity"] = plan.capacity
    return out
