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
fallback, entry, env, root_disk_gib, tags, allowed_types, wait, region, zone, market
(spot, on-demand, auto: spot then on-demand, capacity-block), reservation (cr-..., open,
none; an on-demand launch goes first to the zone of an open reservation with room for its
type, where EC2 runs it in the reservation). This module wires the
account (region, credentials, clients, catalog) to the parts: the plan of a definition
drivers/aws/plan.py (the type choice drivers/vm/choice.py), the quota count
drivers/aws/capacity.py, the request drivers/aws/allocation.py (the boot script
drivers/vm/userdata.py), RunInstances and its fallbacks drivers/aws/launch.py, the run's
instances drivers/aws/instances.py, what an instance's state says drivers/aws/state.py,
the API calls drivers/aws/ec2.py, the tasks and the console drivers/aws/tasks.py.

Ctrl-C during RunInstances answers at once. A launch whose answer was not read is in
doubt (drivers/aws/instances.py): its cleanup ends what the answer, if it comes within a
few seconds, or the allocation's tag shows, and otherwise leaves the row to the next
command's recovery. EC2's API is eventually consistent, so an empty answer is believed
only once the launch is older than DOUBT_WINDOW_SECONDS (the launch notes of
drivers/vm/launches.py say when it was sent): until then a recovery keeps the row
ORPHANED, holding its capacity, and `status` keeps an instance EC2 does not list yet
ALLOCATED. `free` of a FAILED allocation ends any instance still carrying its tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from drivers.aws import capacity
from drivers.aws import plan as planning
from drivers.aws.config import AwsConfig
from drivers.aws.ec2 import HOLDING, Ec2, Instance
from drivers.aws.instances import Doubt, Instances, wait_running
from drivers.aws.state import MANAGED_BY_TAG, detail, remote_rows
from drivers.definitions.options import check_meta_names, load_config
from drivers.spec.base import UNLIMITED, ResourceDriverTask
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    LabelDefinition,
    Resource,
    Resources,
)
from drivers.vm.launches import Launches
from providers.core.errors import CredentialsError, ShoalError, UsageError
from providers.core.http.policy import RetryPolicy
from providers.core.settings import Settings

if TYPE_CHECKING:
    from drivers.aws.plan import Plan
    from providers.aws.credentials import AwsCredentials
    from providers.cloud.catalog import CloudCatalog
    from providers.core.ttlcache import TtlCache

DEFAULT_EC2_URL = "https://ec2.{region}.amazonaws.com"
DEFAULT_SSM_URL = "https://ssm.{region}.amazonaws.com"
DEFAULT_REGION = "us-east-1"
# The timings stay here and are handed to the parts at each call: tests set faster ones.
RETRY_POLICY = RetryPolicy()  # every EC2 and SSM call of the driver
# How long after RunInstances an empty DescribeInstances (or InvalidInstanceID.NotFound)
# proves nothing: AWS advises backing off for up to about five minutes
# (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
DOUBT_WINDOW_SECONDS = 300.0
DOUBT_POLL_SECONDS = 2.0  # the first wait between lookups of an unanswered launch
# The cleanup of a launch Ctrl-C interrupted (interrupts held): so long, then left to the
# next command's recovery.
INTERRUPT_GRACE_SECONDS = 5.0
WAIT_RUNNING_SECONDS, WAIT_POLL_SECONDS = 600.0, 2.0


def _doubt() -> Doubt:
    return Doubt(DOUBT_WINDOW_SECONDS, DOUBT_POLL_SECONDS, INTERRUPT_GRACE_SECONDS)


class AwsDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = AwsConfig()
        self._found: AwsCredentials | None = None
        self._clients: dict[str, Ec2] = {}
        self._plans: dict[str, Plan] = {}
        self._catalog_made: CloudCatalog | None = None
        self._memo_made: TtlCache | None = None
        self._warned: set[str] = set()
        launches = Launches(settings.paths.state_dir / "aws-launches")
        self._instances = Instances(launches, lambda text: settings.warn(f"{full_name}: {text}"))

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
        from providers.regions import region_name

        env = self._settings.env
        chosen = (
            self.cfg.region
            or env.get(ENV_AWS_REGION, "").strip()
            or env.get(ENV_AWS_DEFAULT_REGION, "").strip()
            or setting(self._settings, "aws", "default_region", "", "")
            or self.credentials().region
            or DEFAULT_REGION
        )
        return region_name(chosen, "region")  # it goes into the API's host

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
            from providers.cloud.catalog import CloudCatalog
            from providers.registry import new_catalog

            made = new_catalog("aws", self._settings)
            if not isinstance(made, CloudCatalog):
                raise ShoalError(f"{self._name}: the aws provider is not a cloud catalog")
            self._catalog_made = made
        return self._catalog_made

    def _memo(self) -> TtlCache:
        """What the driver remembers between runs (instance shapes, the regions that offer
        them, an account's quota API found unavailable)."""
        if self._memo_made is None:
            from providers.core.ttlcache import TtlCache

            self._memo_made = TtlCache(self._settings.paths.cache_dir / "aws-driver.json")
        return self._memo_made

    def _warn_once(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._settings.warn(text)

    def _account(self) -> str:
        return self.credentials().credentials.access_key_id

    # -- definitions ---------------------------------------------------------------------

    def validate_definition(self, definition: LabelDefinition) -> None:
        planning.validate(definition, self.cfg, self._name)
        res = definition.resources
        if not (res.cpu and res.ram):  # left to the named type (drivers/definitions)
            self._size_from_type(definition)

    def _size_from_type(self, definition: LabelDefinition) -> None:
        """The cpu and ram a definition left out, from the type it names (the first, as
        planned: its shape checked, the image's architecture with it), so its ledger row
        says what the instance holds."""
        import math

        key = self._key(definition)
        plan = self._plan(definition)
        first = plan.choice.first
        res = definition.resources
        res.cpu = res.cpu or max(1, math.ceil(first.vcpus or 1))
        res.ram = res.ram or max(1, math.ceil(first.memory_gib or 1))
        self._plans[self._key(definition)] = self._plans[key]

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)
        for name in metadata:
            planning.refuse_secret(f"--meta {name}", name)

    @staticmethod
    def _key(definition: LabelDefinition) -> str:
        from providers.core.wire import to_wire

        return json.dumps(to_wire(definition), sort_keys=True, default=str)

    def _plan(self, definition: LabelDefinition) -> Plan:
        key = self._key(definition)
        if key not in self._plans:
            opts = planning.options(definition, self.cfg, self._name)
            self._plans[key] = planning.make_plan(
                definition,
                opts,
                self.ec2(opts.region or None),
                cfg=self.cfg,
                driver=self._name,
                catalog=self._catalog,
                memo=self._memo(),
            )
        return self._plans[key]

    def explain(self, definition: LabelDefinition) -> dict[str, Any]:
        """The type chosen, its price, why the cheaper ones were skipped, the image and the
        account's quota (`alloc --dry-run`)."""
        return planning.explain(self._plan(definition))

    # -- capacity ------------------------------------------------------------------------

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        """How many such instances the account's vCPU quotas still take in the region (its
        snapshot from the catalog cache, fetched again once older than the quota TTL or once
        this driver launched or ended an instance there). Quotas that cannot be read are not
        a refusal: unlimited, with a note."""
        plan = self._plan(req)
        if not self.cfg.check_quotas:
            plan.capacity = {"checked": False, "note": "check_quotas is off"}
            return UNLIMITED
        count = self._quota_count(plan)
        if plan.opts.market == "auto":
            # Spot first, then on-demand: either market's room is room.
            on_demand = replace(plan, spot=False, capacity={})
            count = max(count, self._quota_count(on_demand))
            plan.capacity["on_demand"] = on_demand.capacity
        return count

    def _quota_count(self, plan: Plan) -> int:
        return capacity.quota_count(
            plan,
            driver=self._name,
            account=self._account(),
            catalog=self._catalog(),
            memo=self._memo(),
            settings=self._settings,
            warn=self._warn_once,
        )

    def _forget_capacity(self, region: str) -> None:
        if self.cfg.check_quotas:
            capacity.forget(region, self._account, self._catalog)

    # -- lifecycle -----------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        from drivers.aws import allocation
        from drivers.aws.launch import LaunchCapacityError, launch

        plan = self._plan(definition)
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        request = allocation.request(
            plan, definition, metadata, allocation_id, cfg=self.cfg, driver=self._name
        )
        ec2 = self.ec2(plan.region)
        # -o market=auto: spot, then on-demand when spot found no room.
        markets = [True, False] if plan.opts.market == "auto" else [plan.spot]
        first, tried = 0, list[str]()
        try:
            for number, spot in enumerate(markets, 1):
                places = allocation.places(
                    self.cfg, ec2, plan.opts.zone, "" if spot else self._reserved_zone(plan)
                )
                try:
                    instance, candidate, _ = launch(
                        lambda params: self._instances.run(ec2, params, allocation_id, _doubt()),
                        replace(request, spot=spot),
                        plan.choice.fitting,
                        places,
                        fallback=plan.fallback,
                        where=f"{self._name}: {plan.region}",
                        image_source=plan.image_source,
                        first=first,
                    )
                except LaunchCapacityError as exc:
                    if number == len(markets):
                        if len(markets) > 1:
                            exc.args = (_both(self._name, plan.region, tried, exc),)
                        raise
                    first = exc.attempts
                    tried = [f"{t} spot" for t in exc.tried]
                    self._settings.warn(
                        f"{self._name}: no spot capacity in {plan.region} ({'; '.join(exc.tried)}"
                        "); trying on-demand (-o market=auto)"
                    )
                    continue
                break
            self._forget_capacity(plan.region)
            if plan.opts.wait:
                instance = wait_running(
                    ec2,
                    instance,
                    driver=self._name,
                    limit=WAIT_RUNNING_SECONDS,
                    poll=WAIT_POLL_SECONDS,
                )
        except KeyboardInterrupt:
            self._instances.interrupted(allocation_id)
            raise
        return allocation.resource(allocation_id, plan, instance, candidate, spot)

    def _reserved_zone(self, plan: Plan) -> str:
        """The zone of an open capacity reservation with room for the plan's type, where an
        on-demand launch goes first (EC2 runs it in the reservation by default) unless a
        zone or a reservation was named."""
        if not self.cfg.check_quotas or plan.opts.zone or plan.opts.reservation:
            return ""
        found = capacity.open_reservation(plan, self._catalog())
        return found.zone if found is not None else ""

    def located(self, res: Resource) -> tuple[Ec2, str]:
        """The client of the allocation's region and its instance id ("" for a bare handle)."""
        meta = res.metadata or {}
        return self.ec2(str(meta.get("region") or "") or None), str(meta.get("instance_id") or "")

    def _current(self, res: Resource) -> Instance | None:
        ec2, instance_id = self.located(res)
        return self._instances.current(ec2, instance_id, res.identifier, DOUBT_WINDOW_SECONDS)

    def status(self, res: Resource) -> str:
        current = self._current(res)
        return STATUS_ALLOCATED if current is not None and current.holds else STATUS_NONE

    def describe(self, res: Resource) -> dict[str, Any]:
        """The instance's state, and for one that ended why (spot interruption, its lifetime,
        terminated), with its addresses; shown by `shoal status ID`."""
        return detail(self._current(res), res.identifier)

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
        return detail(self._current(res) if ids else None, res.identifier)

    def deallocate(self, res: Resource) -> None:
        """TerminateInstances; an instance already gone is fine. A bare handle (the cleanup
        of an interrupted alloc) ends every instance carrying the allocation's tag, and is
        a LaunchInDoubt (a ShoalError: the recovery keeps the row ORPHANED) while a launch
        sent lately shows nothing yet. The cleanup of an alloc Ctrl-C interrupted that
        cannot learn within seconds what it launched raises LeftForRecovery, a
        KeyboardInterrupt: the interrupt goes on (130) past the cleanup's handling of
        ShoalError, the row is not recorded FAILED, and the next command finds it ORPHANED."""
        self._end(res)

    def end_leftovers(self, res: Resource) -> list[str]:
        """What a FAILED allocation left running (a launch whose answer was lost, or whose
        cleanup could not reach EC2), found by its tag and ended: the ids ended now."""
        _, ended = self._end(Resource(identifier=res.identifier))
        over = ("shutting-down", "terminated")
        return [ident for ident, (before, _) in ended.items() if before not in over]

    def _end(self, res: Resource) -> tuple[list[str], dict[str, tuple[str, str]]]:
        ec2, instance_id = self.located(res)
        if not instance_id:
            launched = self._instances.launch_region(res.identifier)
            ec2 = self.ec2(launched) if launched else ec2
        ids, ended = self._instances.end(ec2, instance_id, res.identifier, _doubt())
        if ended:
            self._forget_capacity(ec2.region)
        return ids, ended

    # -- what the account holds for shoal ------------------------------------------------

    def remote_allocations(self) -> list[dict[str, Any]]:
        """shoal's instances in the region, made by any machine (their tags say), those
        terminated within the hour EC2 still lists them included (holding nothing)."""
        from providers.core.timeutil import utcnow

        ec2 = self.ec2()
        now = utcnow()
        found = ec2.describe_instances(tags={MANAGED_BY_TAG: "shoal"})
        return remote_rows(found, driver=self._name, region=ec2.region, now=now)

    # -- tasks and logs ------------------------------------------------------------------

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        from drivers.aws.tasks import TASKS, AwsTask
        from drivers.definitions.options import task_options

        checked = task_options(TASKS, task, options)
        return None if checked is None else AwsTask(self, task, checked)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The instance's console output; with `follow`, what is new every few seconds until
        the instance ends."""
        from drivers.aws.tasks import console

        ec2, instance_id = self.located(res)
        if not instance_id:
            raise UsageError(f"{res.identifier}: no instance of its own to read the console of")

        def holds() -> bool:
            self._instances.unseen(res.identifier)
            current = self._current(res)
            return current is not None and current.holds

        poll = WAIT_POLL_SECONDS * 2
        yield from console(ec2, instance_id, tail=tail, follow=follow, holds=holds, poll=poll)


def _both(driver: str, region: str, spot: Sequence[str], exc: ShoalError) -> str:
    """`-o market=auto`'s error when neither market had room: every attempt of both."""
    from drivers.aws.launch import LaunchCapacityError

    on_demand = exc.tried if isinstance(exc, LaunchCapacityError) else []
    attempts = [*spot, *(f"{t} on-demand" for t in on_demand)] or [str(exc)]
    return f"{driver}: {region}: no capacity in either market; tried {'; '.join(attempts)}"
