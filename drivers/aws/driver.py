"""The `aws` driver (alias `ec2`): each allocation is an EC2 instance.

State lives in EC2: the instance carries the tags `shoal:allocation=ID`,
`shoal:managed-by=shoal` and `shoal:expires=RFC3339` from the moment it exists, so every
machine running shoal against the account sees it (`status --remote aws`, `free ID --remote
aws`); the ledger records what this machine did. The driver is remote: it never counts
against this host. Capacity is the account's: how many such instances its vCPU quotas
still take (providers/aws/accounts.py through the catalog cache), AWS's own check at
RunInstances having the last word.

Config (`[drivers."aws/NAME"]`, drivers/aws/config.py): region, image, subnets, zones,
security_groups, key_name, instance_profile, root_disk_gib, tags, allowed_types, spot,
fallback, check_quotas. Options (`-o`): image, instance_type, gpus, gpu, spot, max_price,
fallback, entry, env, root_disk_gib, tags, allowed_types, wait. The type choice is
drivers/aws/choice.py, the boot script drivers/aws/userdata.py, RunInstances and its
fallbacks drivers/aws/launch.py, the API calls drivers/aws/ec2.py, the tasks
drivers/aws/tasks.py.

Ctrl-C: SIGINT is held while RunInstances is in flight, so the instance it launched is
always known to the cleanup an interrupt runs; a cleanup with only the allocation id (an
interrupted or killed alloc) finds its instance by tag and terminates it.
"""

from __future__ import annotations

import json
import math
import signal
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from drivers.aws.config import AwsConfig, AwsOptions
from drivers.aws.ec2 import HOLDING, LIVE, ApiError, Ec2, Instance, TypeShape
from drivers.base import UNLIMITED, ResourceDriverTask
from drivers.options import check_meta_names, load_config, parse_options
from drivers.types import STATUS_ALLOCATED, STATUS_NONE, LabelDefinition, Resource, Resources
from providers.core.errors import (
    CredentialsError,
    RetryableError,
    ShoalError,
    UsageError,
    is_secret_name,
)
from providers.core.http.policy import RetryPolicy
from providers.core.settings import Settings

if TYPE_CHECKING:
    from drivers.aws.choice import Choice
    from drivers.aws.memo import Memo
    from providers.accounts.model import Market
    from providers.aws.credentials import AwsCredentials
    from providers.cloud.catalog import CloudCatalog
    from providers.models import ResourcePricing

ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"
ALLOCATION_TAG = "shoal:allocation"
MANAGED_BY_TAG = "shoal:managed-by"
EXPIRES_TAG = "shoal:expires"
OWNER_TAG = "shoal:owner"
DRIVER_TAG = "shoal:driver"
DEFAULT_EC2_URL = "https://ec2.{region}.amazonaws.com"
DEFAULT_SSM_URL = "https://ssm.{region}.amazonaws.com"
DEFAULT_REGION = "us-east-1"
# Tests set a faster one; every EC2 and SSM call of the driver uses it.
RETRY_POLICY = RetryPolicy()
# A cleanup that does not know whether RunInstances got through asks again for a while:
# DescribeInstances is eventually consistent (a new instance may take a moment to show).
DOUBT_TRIES, DOUBT_WAIT_SECONDS = 4, 1.0
WAIT_RUNNING_SECONDS, WAIT_POLL_SECONDS = 600.0, 2.0
SEEN_FOR_SECONDS = 2.0  # `status ID` asks status() then describe(): one DescribeInstances
SECRET_FIX = (
    "user-data and tags are readable by anyone who may describe the instance, and by every "
    "process on it; give the instance a role (instance_profile) and read secrets at boot "
    "(e.g. from SSM Parameter Store)"
)


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
    # When its capacity was last checked: the service computed the allocation's expiry just
    # before, so the instance's lifetime starts then too (not after the checks it waited on).
    checked_at: datetime | None = None


class AwsDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = AwsConfig()
        self._found: AwsCredentials | None = None
        self._clients: dict[str, Ec2] = {}
        self._plans: dict[str, Plan] = {}
        self._catalog_made: CloudCatalog | None = None
        self._memo_made: Memo | None = None
        self._launched: dict[str, list[str]] = {}  # allocation id -> instances this run launched
        self._in_doubt: set[str] = set()  # RunInstances sent, no answer
        self._ended: set[str] = set()  # instances this run terminated
        self._seen: dict[str, tuple[float, Instance | None]] = {}
        self._warned: set[str] = set()

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return True

    def prepare(self, config: bytes) -> None:
        self.cfg = load_config(AwsConfig, config, self._name, self._settings.paths.config_file)

    # -- the account ---------------------------------------------------------------------

    def region(self) -> str:
        """`[drivers."aws/NAME"] region`, else AWS_REGION, AWS_DEFAULT_REGION, `[aws]
        default_region`, the AWS profile's region, else us-east-1."""
        from providers.config import setting
        from providers.core.env import ENV_AWS_DEFAULT_REGION, ENV_AWS_REGION

        env = self._settings.env
        return (
            self.cfg.region
            or env.get(ENV_AWS_REGION, "").strip()
            or env.get(ENV_AWS_DEFAULT_REGION, "").strip()
            or setting(self._settings, "aws", "default_region", "", "")
            or self.credentials().region
            or DEFAULT_REGION
        )

    def credentials(self) -> AwsCredentials:
        if self._found is None:
            from providers.aws.accounts import CREDENTIALS_HINT
            from providers.aws.credentials import find_credentials

            found = find_credentials(self._settings.env)
            if found is None:
                raise CredentialsError(
                    f"{self._name}: launching EC2 instances needs AWS credentials; "
                    f"{CREDENTIALS_HINT}"
                )
            self._found = found
        return self._found

    def ec2(self, region: str | None = None) -> Ec2:
        region = region or self.region()
        if region not in self._clients:
            from providers.aws.accounts import REFUSED_HINT
            from providers.config import base_url
            from providers.core.env import ENV_AWS_EC2_URL, ENV_AWS_SSM_URL

            settings = self._settings
            self._clients[region] = Ec2(
                region,
                self.credentials().credentials,
                ec2_url=base_url(settings, "aws", "ec2_url", ENV_AWS_EC2_URL, DEFAULT_EC2_URL),
                ssm_url=base_url(settings, "aws", "ssm_url", ENV_AWS_SSM_URL, DEFAULT_SSM_URL),
                auth_hint=REFUSED_HINT,
                policy=RETRY_POLICY,
            )
        return self._clients[region]

    def _catalog(self) -> CloudCatalog:
        if self._catalog_made is None:
            from providers.catalog import new_catalog
            from providers.cloud.catalog import CloudCatalog

            made = new_catalog("aws", self._settings)
            if not isinstance(made, CloudCatalog):
                raise ShoalError(f"{self._name}: the aws provider is not a cloud catalog")
            self._catalog_made = made
        return self._catalog_made

    def _memo(self) -> Memo:
        if self._memo_made is None:
            from drivers.aws.memo import Memo

            self._memo_made = Memo(self._settings.paths.cache_dir / "aws-driver.json")
        return self._memo_made

    def _warn_once(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._settings.warn(text)

    # -- definitions ---------------------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> AwsOptions:
        opts = parse_options(AwsOptions, definition.options)
        opts.image = opts.image or self.cfg.image
        if not opts.image:
            raise UsageError(
                "options.image: required, the AMI to boot; e.g. -o image=ami-0123456789abcdef0 "
                "or -o image=ssm:/aws/service/ami-amazon-linux-latest/"
                f'al2023-ami-kernel-default-x86_64 (or set image in [drivers."{self._name}"])'
            )
        return opts

    def validate_definition(self, definition: LabelDefinition) -> None:
        opts = self._options(definition)
        if definition.authentication is not None:
            raise UsageError(
                f"authentication: the aws driver puts nothing secret on an instance: {SECRET_FIX}; "
                "for ssh, name an EC2 key pair with key_name in the driver's config"
            )
        if definition.resources.disks:
            raise UsageError("resources.disks: the aws driver takes -o root_disk_gib=N instead")
        for name in opts.env:
            _refuse_secret(f"options.env.{name}", name)
        spot = self.cfg.spot if opts.spot is None else opts.spot
        if opts.max_price is not None and not spot:
            raise UsageError("options.max_price: a spot price limit; add -o spot=true")

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)
        for name in metadata:
            _refuse_secret(f"--meta {name}", name)

    def _plan(self, definition: LabelDefinition) -> Plan:
        from providers.core.wire import to_wire

        key = json.dumps(to_wire(definition), sort_keys=True, default=str)
        if key not in self._plans:
            self._plans[key] = self._make_plan(definition)
        return self._plans[key]

    def _make_plan(self, definition: LabelDefinition) -> Plan:
        from drivers.aws import choice

        opts = self._options(definition)
        region = self.region()
        ec2 = self.ec2(region)
        source = "options.image" if definition.options.get("image") else (
            f'[drivers."{self._name}"] image'
        )  # fmt: skip
        image = self._image_id(ec2, opts.image, source)
        names = [opts.instance_type] if isinstance(opts.instance_type, str) else opts.instance_type
        arch = root_device = ""
        root_disk = self.cfg.root_disk_gib if opts.root_disk_gib is None else opts.root_disk_gib
        if not names or root_disk:
            arch, root_device = self._image_facts(ec2, image, source)
        spot = self.cfg.spot if opts.spot is None else opts.spot
        wanted_gpus = opts.gpus or (1 if opts.gpu else 0)
        want = choice.Want(
            cpu=definition.resources.cpu,
            ram=definition.resources.ram,
            gpus=wanted_gpus,
            gpu=opts.gpu,
            spot=spot,
            max_price=opts.max_price,
            arch=arch,
            allowed=tuple(
                self.cfg.allowed_types if opts.allowed_types is None else opts.allowed_types
            ),
        )
        if names:
            shapes, prices = self._named_types(ec2, names)
            chosen = choice.named(region, names, dict(shapes), prices, want)
        else:
            chosen = choice.from_catalog(self._pricing(region), want)
        if spot and opts.max_price is not None:
            self._check_spot_price(ec2, chosen.first.name, opts.max_price)
        return Plan(
            region=region,
            opts=opts,
            image=image,
            image_source=source,
            image_arch=arch,
            root_device=root_device,
            choice=chosen,
            spot=spot,
            fallback=opts.fallback or self.cfg.fallback,
        )

    def _image_id(self, ec2: Ec2, ref: str, source: str) -> str:
        """An AMI id as given, or the one an SSM parameter holds (`ssm:/aws/service/...`)."""
        if not ref.startswith("ssm:"):
            return ref
        from drivers.aws.config import _AMI

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

    def _image_facts(self, ec2: Ec2, image: str, source: str) -> tuple[str, str]:
        """(architecture, root device name) of the AMI; one EC2 does not know is a UsageError."""
        from drivers.aws.ec2 import _arch

        try:
            found = ec2.image(image)
        except ApiError as exc:
            raise UsageError(
                f"{source}: {image} in {ec2.region}: {exc.code}: {exc.detail}"
            ) from None
        if found is None:
            raise UsageError(f"{source}: {image} does not exist in {ec2.region} (DescribeImages)")
        if found.state and found.state != "available":
            raise UsageError(f"{source}: {image} is {found.state}, not available")
        return _arch(found.arch), found.root_device

    def _pricing(self, region: str) -> ResourcePricing:
        """The region's prices and shapes from the price catalog (refreshed when stale)."""
        from providers.models import RegionSpec, ResourceListOptions

        pricings = self._catalog().list_pricing(ResourceListOptions(region=RegionSpec(name=region)))
        if not pricings:
            raise ShoalError(f"{self._name}: the aws price catalog has nothing for {region}")
        return pricings[0]

    def _named_types(
        self, ec2: Ec2, names: Sequence[str]
    ) -> tuple[dict[str, TypeShape], dict[str, tuple[float | None, float | None]]]:
        """Shapes and (on-demand, spot) prices of the types `-o instance_type` names: from the
        region's cached price catalog when it lists them, else from EC2 (DescribeInstanceTypes
        and DescribeInstanceTypeOfferings, remembered for a day). A type EC2 does not know, or
        the region does not offer, is a UsageError naming it."""
        from drivers.aws.memo import DAY

        region = ec2.region
        cache = self._catalog().cache
        offers = {}
        if region in cache.snapshots("aws"):
            offers = {
                o.instance_type: o for o in cache.offers("aws", region) if o.instance_type in names
            }
        shapes: dict[str, TypeShape] = {}
        prices: dict[str, tuple[float | None, float | None]] = {}
        memo = self._memo()
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
                memo.put("shapes", name, found[name].to_json(), DAY)
                memo.put("offered", f"{region}/{name}", True, DAY)
        return shapes, prices

    def _check_spot_price(self, ec2: Ec2, instance_type: str, max_price: float) -> None:
        zones = set(self.cfg.zones)
        prices = {
            z: p for z, p in ec2.spot_prices(instance_type).items() if not zones or z in zones
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

    def explain(self, definition: LabelDefinition) -> dict[str, Any]:
        """The type chosen, its price, why the cheaper ones were skipped, the image and the
        account's quota (`alloc --dry-run`)."""
        plan = self._plan(definition)
        out = plan.choice.to_json()
        out["image"] = plan.image
        if plan.image_arch:
            out["image_arch"] = plan.image_arch
        if plan.capacity:
            out["capacity"] = plan.capacity
        return out

    # -- capacity ------------------------------------------------------------------------

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        """How many such instances the account's vCPU quotas still take in the region (its
        snapshot from the catalog cache, fetched again once older than the quota TTL or once
        this driver launched or ended an instance there). Quotas that cannot be read are not
        a refusal: unlimited, with a note."""
        from providers.core.timeutil import utcnow

        started = utcnow()
        plan = self._plan(req)
        plan.checked_at = started
        if not self.cfg.check_quotas:
            plan.capacity = {"checked": False, "note": "check_quotas is off"}
            return UNLIMITED
        return self._quota_count(plan)

    def _quota_count(self, plan: Plan) -> int:
        from providers.accounts.resource import allocatable
        from providers.aws.families import AwsQuotaMap

        candidate = plan.choice.first
        account = self.credentials().credentials.access_key_id
        key = f"{account}/{plan.region}"
        down = self._memo().get("quotas_down", key)
        if down:
            return self._unchecked(plan, f"{down} (noted earlier)")
        try:
            capacity = self._catalog().capacity()
            ((snapshot, _stale),) = capacity.snapshots([plan.region])
        except ShoalError as exc:
            from providers.config import quota_ttl

            reason = f"the account's quotas in {plan.region} could not be read ({exc})"
            self._memo().put(
                "quotas_down", key, reason, quota_ttl(self._settings, "aws").total_seconds()
            )
            return self._unchecked(plan, reason)
        market: Market = "spot" if plan.spot else "onDemand"
        needs = AwsQuotaMap(snapshot.quotas).needs(
            candidate.name, candidate.vcpus, candidate.gpu, candidate.gpu_count, market
        )
        quotas: list[dict[str, Any]] = []
        counts: list[int] = []
        for need in needs:
            free = allocatable(snapshot, need.code)
            names = [q.name for q in snapshot.quotas if q.code == need.code]
            entry: dict[str, Any] = {
                "quota": need.code,
                "name": names[0] if names else "",
                "needs": need.amount,
                "free": free,
            }
            if free is not None:
                entry["fits"] = math.floor(free / need.amount)
                counts.append(entry["fits"])
                if counts[-1] < 1:
                    self._warn_once(
                        f"{self._name}: {need.code} ({entry['name']}) has {free:g} vCPUs free in "
                        f"{plan.region}; {candidate.name} needs {need.amount:g}: free instances, "
                        "or ask AWS for a higher quota"
                    )
            quotas.append(entry)
        count = min(counts) if counts else UNLIMITED
        plan.capacity = {"checked": bool(counts), "region": plan.region, "quotas": quotas}
        if snapshot.notes:
            plan.capacity["notes"] = list(snapshot.notes)
        if not counts:
            what = "no vCPU quota applies" if not needs else "the quota's usage is unknown"
            plan.capacity["note"] = f"{what}: not counted"
        return count

    def _unchecked(self, plan: Plan, reason: str) -> int:
        note = f"{self._name}: {reason}; capacity not checked (AWS still refuses what is over)"
        plan.capacity = {"checked": False, "note": note}
        self._warn_once(note)
        return UNLIMITED

    def _forget_capacity(self, region: str) -> None:
        """Our launch or termination changed the region's usage: ask again next time."""
        if not self.cfg.check_quotas:
            return
        try:
            account = self.credentials().credentials.access_key_id
            self._catalog().cache.forget_account("aws", account, region)
        except (ShoalError, OSError):
            pass

    # -- lifecycle -----------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        from drivers.aws.launch import Place, Request, launch
        from drivers.aws.userdata import user_data
        from drivers.definition import expires_at
        from providers.core.wire import format_time

        plan = self._plan(definition)
        opts = plan.opts
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        expires = expires_at(definition, plan.checked_at)
        if expires is not None and expires.microsecond:  # whole seconds, never before the ledger's
            expires = expires.replace(microsecond=0) + timedelta(seconds=1)
        # Metadata last: -o env cannot forge SHOAL_ALLOCATION_ID.
        environment = opts.env | {str(k): str(v) for k, v in metadata.items()}
        script = user_data(
            allocation_id, expires=expires, environment=environment, entry=opts.entry
        )
        tags = {"Name": f"shoal-{allocation_id}", **self.cfg.tags, **opts.tags}
        tags.update({
            ALLOCATION_TAG: allocation_id,
            MANAGED_BY_TAG: "shoal",
            OWNER_TAG: socket.gethostname()[:256],
            DRIVER_TAG: self._name,
        })  # fmt: skip
        if expires is not None:
            tags[EXPIRES_TAG] = format_time(expires)
        root_disk = self.cfg.root_disk_gib if opts.root_disk_gib is None else opts.root_disk_gib
        request = Request(
            allocation_id=allocation_id,
            image=plan.image,
            user_data=script,
            tags=tags,
            security_groups=self.cfg.security_groups,
            key_name=self.cfg.key_name,
            instance_profile=self.cfg.instance_profile,
            root_device=plan.root_device,
            root_disk_gib=root_disk,
            spot=plan.spot,
            max_price=opts.max_price,
        )
        ec2 = self.ec2(plan.region)

        def places(every: bool) -> list[Place]:
            configured = [Place(subnet=s) for s in self.cfg.subnets] or [
                Place(zone=z) for z in self.cfg.zones
            ]
            if configured:
                return configured if every else configured[:1]
            return [Place(), *(Place(zone=z) for z in ec2.zones())] if every else [Place()]

        instance, candidate, _ = launch(
            lambda params: self._run(ec2, params, allocation_id),
            request,
            plan.choice.fitting,
            places,
            fallback=plan.fallback,
            where=f"{self._name}: {plan.region}",
            image_source=plan.image_source,
        )
        self._forget_capacity(plan.region)
        if opts.wait:
            instance = self._wait_running(ec2, instance)
        meta = {
            "instance_id": instance.id,
            "region": plan.region,
            "zone": instance.zone,
            "subnet": instance.subnet,
            "instance_type": candidate.name,
            "market": "spot" if plan.spot else "on-demand",
            "price": candidate.price,
            "image": plan.image,
            "private_ip": instance.private_ip,
            "public_ip": instance.public_ip,
        }
        return Resource(
            identifier=allocation_id,
            ip_addr=instance.public_ip or instance.private_ip,
            hw_addr=instance.mac,
            metadata={k: v for k, v in meta.items() if v not in ("", None)},
        )

    def _run(self, ec2: Ec2, params: dict[str, str], allocation_id: str) -> list[Instance]:
        """RunInstances with SIGINT held until its answer is read and its instance noted
        (a Ctrl-C then undoes a launch it knows); an answer never read leaves the launch in
        doubt, which the cleanup settles by asking for the allocation's tag."""
        try:
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        except (AttributeError, ValueError, OSError):  # no signal masks here
            held = None
        self._in_doubt.add(allocation_id)
        try:
            found = ec2.run_instances(params)
            self._launched.setdefault(allocation_id, []).extend(i.id for i in found)
            self._in_doubt.discard(allocation_id)
            return found
        except ApiError:
            self._in_doubt.discard(allocation_id)  # refused: nothing was launched
            raise
        finally:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _wait_running(self, ec2: Ec2, instance: Instance) -> Instance:
        deadline = time.monotonic() + WAIT_RUNNING_SECONDS
        while instance.state == "pending" and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_SECONDS)
            found = ec2.describe_instances([instance.id])
            instance = found[0] if found else instance
        if instance.state != "running":
            why = instance.reason_message or "no reason given"
            raise RetryableError(
                f"{self._name}: {instance.id} is {instance.state or 'unknown'} after "
                f"{WAIT_RUNNING_SECONDS:.0f}s, not running ({why})"
            )
        return instance

    def located(self, res: Resource) -> tuple[Ec2, str]:
        """The client of the allocation's region and its instance id ("" for a bare handle)."""
        meta = res.metadata or {}
        return self.ec2(str(meta.get("region") or "") or None), str(meta.get("instance_id") or "")

    def _tagged(self, ec2: Ec2, allocation_id: str) -> list[Instance]:
        tags = {ALLOCATION_TAG: allocation_id, MANAGED_BY_TAG: "shoal"}
        return ec2.describe_instances(tags=tags, states=LIVE)

    def _current(self, res: Resource) -> Instance | None:
        """The allocation's instance as EC2 sees it now (None: EC2 no longer knows it)."""
        seen = self._seen.get(res.identifier)
        if seen is not None and time.monotonic() - seen[0] < SEEN_FOR_SECONDS:
            return seen[1]
        ec2, instance_id = self.located(res)
        if instance_id:
            found = ec2.describe_instances([instance_id])
        else:
            found = self._tagged(ec2, res.identifier)
        found.sort(key=lambda i: i.state not in HOLDING)
        current = found[0] if found else None
        self._seen[res.identifier] = (time.monotonic(), current)
        return current

    def status(self, res: Resource) -> str:
        current = self._current(res)
        return STATUS_ALLOCATED if current is not None and current.holds else STATUS_NONE

    def describe(self, res: Resource) -> dict[str, Any]:
        """The instance's state, and for one that ended why (spot interruption, its lifetime,
        terminated), with its addresses; shown by `shoal status ID`."""
        return _detail(self._current(res), res.identifier)

    def finish(self, res: Resource) -> dict[str, Any]:
        """End the instance (it keeps nothing worth stopping for: its root volume goes with
        it) and tell how it ended: terminated now, or on its own before (its lifetime, a
        spot interruption)."""
        ids, ended = self._end(res)
        before = [previous for previous, _ in ended.values()]
        if any(state in (*HOLDING, "stopping", "stopped") for state in before):
            now = [current for _, current in ended.values()]
            return {
                "state": now[0] if now else "shutting-down",
                "previous_state": before[0],
                "reason": "terminated",
                "by": "shoal",
                "instance_id": ids[0],
            }
        return _detail(self._current(res) if ids else None, res.identifier)

    def deallocate(self, res: Resource) -> None:
        """TerminateInstances; an instance already gone is fine. A bare handle (the cleanup
        of an interrupted alloc) ends every instance carrying the allocation's tag."""
        self._end(res)

    def _end(self, res: Resource) -> tuple[list[str], dict[str, tuple[str, str]]]:
        """Terminate the allocation's instance(s): (their ids, id -> (previous state,
        current state) of those terminated now). A bare handle's are those this run launched
        for it, ended first whatever happens next, and those carrying its tag (asked again
        for a moment when RunInstances may have got through unanswered: DescribeInstances is
        eventually consistent)."""
        ec2, instance_id = self.located(res)
        ids = [instance_id] if instance_id else list(self._launched.get(res.identifier, []))
        ended = self._terminate(ec2, ids)
        if not instance_id:
            tries = DOUBT_TRIES if res.identifier in self._in_doubt and not ids else 1
            for attempt in range(tries):
                try:
                    tagged = [i.id for i in self._tagged(ec2, res.identifier)]
                except ShoalError:
                    if ids:
                        break  # what this run launched is ended: that is what it could leak
                    raise
                more = [i for i in tagged if i not in ids]
                ids += more
                ended.update(self._terminate(ec2, more))
                if ids:
                    break
                if attempt + 1 < tries:
                    time.sleep(DOUBT_WAIT_SECONDS)
        self._seen.pop(res.identifier, None)
        if ended:
            self._forget_capacity(ec2.region)
        return ids, ended

    def _terminate(self, ec2: Ec2, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        left = [i for i in ids if i not in self._ended]
        if not left:
            return {}
        ended = ec2.terminate(left)
        self._ended.update(left)
        return ended

    # -- what the account holds for shoal ------------------------------------------------

    def remote_allocations(self) -> list[dict[str, Any]]:
        """shoal's instances in the region, made by any machine (their tags say), those
        terminated within the hour EC2 still lists them included (holding nothing)."""
        from providers.core.timeutil import utcnow

        ec2 = self.ec2()
        now = utcnow()
        rows = []
        for inst in ec2.describe_instances(tags={MANAGED_BY_TAG: "shoal"}):
            if not inst.tags.get(ALLOCATION_TAG):
                continue
            detail = _detail(inst, inst.tags[ALLOCATION_TAG])
            expires = inst.tags.get(EXPIRES_TAG, "")
            overdue = inst.holds and _past(expires, now)
            note = " ".join(
                part
                for part in (
                    f"{inst.id} {inst.instance_type} in {inst.zone}",
                    inst.public_ip or inst.private_ip,
                    "(spot)" if inst.lifecycle == "spot" else "",
                    f"({detail['reason']})" if detail.get("reason") else "",
                    "past its expiry: `shoal free --expired --remote "
                    f"{self._name.partition('/')[0]}` ends it"
                    if overdue
                    else "",
                )
                if part
            )
            rows.append(
                {
                    # The fields every driver's listing shares, then this driver's own.
                    "id": inst.tags[ALLOCATION_TAG],
                    "driver": self.name(),
                    "status": inst.state,
                    "created": inst.launched,
                    "note": note,
                    "expires": expires or None,
                    "holds": inst.holds,
                    "expired": overdue,
                    "instance_id": inst.id,
                    "instance_type": inst.instance_type,
                    "region": ec2.region,
                    "zone": inst.zone,
                    "market": detail["market"],
                    "private_ip": inst.private_ip,
                    "public_ip": inst.public_ip,
                    "reason": detail.get("reason", ""),
                    "owner": inst.tags.get(OWNER_TAG, ""),
                }
            )
        return sorted(rows, key=lambda r: (str(r["created"]), str(r["id"])))

    # -- tasks and logs ------------------------------------------------------------------

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        from drivers.aws.tasks import TASKS, AwsTask
        from drivers.options import task_options

        checked = task_options(TASKS, task, options)
        return None if checked is None else AwsTask(self, task, checked)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The instance's console output (GetConsoleOutput: the latest EC2 keeps, up to
        64 KiB); with `follow`, what is new every few seconds until the instance ends."""
        ec2, instance_id = self.located(res)
        if not instance_id:
            raise UsageError(f"{res.identifier}: no instance of its own to read the console of")
        _, data = ec2.console_output(instance_id)
        if tail is not None:
            data = b"".join(data.splitlines(keepends=True)[-tail:]) if tail else b""
        yield data
        shown = data
        while follow:
            time.sleep(WAIT_POLL_SECONDS * 2)
            _, now = ec2.console_output(instance_id)
            yield _new_part(shown, now)
            shown = now
            self._seen.pop(res.identifier, None)
            current = self._current(res)
            follow = current is not None and current.holds


def _refuse_secret(where: str, name: str) -> None:
    if is_secret_name(name):
        raise UsageError(f"{where}: looks like a credential; {SECRET_FIX}")


def _new_part(before: bytes, now: bytes) -> bytes:
    """What `now` adds after `before` (the console is a sliding window of its last bytes)."""
    if now.startswith(before):
        return now[len(before) :]
    for size in range(min(len(before), len(now)), 0, -1):
        if now.startswith(before[-size:]):
            return now[size:]
    return now


def _past(stamp: str, now: datetime) -> bool:
    from providers.core.timeutil import parse_time

    try:
        return bool(stamp) and parse_time(stamp, EXPIRES_TAG) <= now
    except UsageError:
        return False


def _detail(inst: Instance | None, allocation_id: str) -> dict[str, Any]:
    if inst is None:
        return {
            "state": "gone",
            "reason": "not-found",
            "message": "EC2 no longer lists the instance (terminated over an hour ago)",
        }
    out: dict[str, Any] = {
        "state": inst.state,
        "instance_id": inst.id,
        "instance_type": inst.instance_type,
        "zone": inst.zone,
        "market": "spot" if inst.lifecycle == "spot" else "on-demand",
        "private_ip": inst.private_ip,
        "public_ip": inst.public_ip,
        "launched": inst.launched,
        "expires": inst.tags.get(EXPIRES_TAG, ""),
    }
    if not inst.holds:
        out["reason"], out["message"] = _why_ended(inst)
    return out


def _why_ended(inst: Instance) -> tuple[str, str]:
    from providers.core.timeutil import utcnow

    code, message = inst.reason_code, inst.reason_message or inst.transition
    if code.startswith("Server.Spot"):
        return "spot-interruption", message
    if code == "Client.InstanceInitiatedShutdown":
        expires = inst.tags.get(EXPIRES_TAG, "")
        if expires and _past(expires, utcnow()):
            return "expired", f"shut down at the end of its lifetime ({EXPIRES_TAG} {expires})"
        return "shutdown-from-inside", message
    if code == "Client.UserInitiatedShutdown":
        return "terminated", message or inst.transition
    return code or inst.state, message
