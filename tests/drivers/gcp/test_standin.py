"""The Compute Engine stand-in behaves as the real API documents it, and holds whoever calls
it (and itself) to the discovery document: lifecycles and asynchronous operations, requestId
deduplication, lifetimes on its clock, Google's error shapes and codes, the fault knobs, the
contract checks, and gcloud driven against it without leaving the machine."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.drivers.gcp import discovery
from tests.drivers.gcp.gcloud import Gcloud
from tests.drivers.gcp.standin import (
    STATUS_NAMES,
    TOKEN,
    Client,
    ComputeStandin,
    Timing,
    insert_body,
    parse_filter,
    select_fields,
)

Z = "us-central1-a"
# States that last long on the stand-in's clock: a test moves it on with advance(), so what
# it sees does not depend on how fast this machine is.
SLOW = Timing(pending=50, provision=50, stage=50, stop=50, snapshot=50, image=50)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def google_error(response: httpx.Response, status: int, reason: str) -> str:
    """Google's error shape, with this status and reason; its message."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) <= {"code", "message", "errors", "status"}
    assert error["code"] == status
    assert error["status"] == STATUS_NAMES[status]
    assert error["errors"][0]["reason"] == reason
    assert error["errors"][0]["domain"]
    assert error["errors"][0]["message"] == error["message"]
    return str(error["message"])


def region_quotas(api: Client, region: str) -> dict[str, Any]:
    return {q["metric"]: q for q in ok(api.get(f"projects/shoal-test/regions/{region}"))["quotas"]}


def launch(api: Client, name: str, zone: str = Z, **extra: Any) -> dict[str, Any]:
    op = ok(api.insert(insert_body(name, zone, **extra), zone))
    return api.wait(op)


# --- the contract -------------------------------------------------------------------------


def test_every_served_method_is_a_method_of_the_discovery_document(gce: ComputeStandin) -> None:
    contract = discovery.load()
    assert contract.base_path == "/compute/v1/"
    assert set(gce.handlers) <= set(contract.by_id)
    insert = contract.by_id["compute.instances.insert"]
    assert insert.http_method == "POST"
    assert insert.path == "projects/{project}/zones/{zone}/instances"
    assert insert.request == "Instance" and insert.response == "Operation"
    route = contract.route("POST", "projects/p/zones/z/operations/operation-1/wait")
    assert route is not None and route.method.id == "compute.zoneOperations.wait"
    assert route.params == {"project": "p", "zone": "z", "operation": "operation-1"}
    family = contract.route("GET", "projects/debian-cloud/global/images/family/debian-12")
    assert family is not None and family.method.id == "compute.images.getFromFamily"


def test_validator_knows_the_documents_types_and_formats() -> None:
    contract = discovery.load()
    good = insert_body("vm", scheduling={"maxRunDuration": {"seconds": "3600", "nanos": 0}})
    assert contract.validate(good, "Instance", method_id="compute.instances.insert") == []
    bad = {
        "name": 7,
        "canIpForward": "no",
        "disks": [{"diskSizeGb": 10, "interface": "IDE", "index": 2**40}],
        "labels": {"k": 1},
        "scheduling": {"maxRunDuration": {"seconds": "1h"}},
        "metadata": {"items": [{"key": "bad key!", "value": "x"}, {"value": "no key"}]},
        "fingerprint": "not base64 !",
        "shoal": True,
    }
    found = contract.validate(bad, "Instance", method_id="compute.instances.insert")
    assert set(found) == {
        "Instance.name: expected a string, got 7",
        'Instance.canIpForward: expected a boolean, got "no"',
        "Instance.disks[0].diskSizeGb: expected a string (Google's JSON carries 64-bit "
        "integers as strings), got 10",
        "Instance.disks[0].interface: 'IDE' is not a value of the enum",
        f"Instance.disks[0].index: {2**40} is out of the int32 range",
        "Instance.labels['k']: expected a string, got 1",
        "Instance.scheduling.maxRunDuration.seconds: int64 must be a decimal string, got '1h'",
        "Instance.metadata.items[0].key: 'bad key!' does not match the pattern "
        "'[a-zA-Z0-9-_]{1,128}'",
        "Instance.metadata.items[1].key: required by compute.instances.insert",
        "Instance.fingerprint: byte must be base64, got 'not base64 !'",
        "Instance: unknown property 'shoal'",
    }
    # Required fields bind only the method that names them; output-only fields are accepted.
    assert contract.validate({"metadata": {"items": [{"value": "v"}]}}, "Instance") == []
    assert contract.validate({"status": "RUNNING", "id": "12"}, "Instance") == []
    assert contract.validate({"id": "-1"}, "Operation") == [
        "Operation.id: -1 is out of the uint64 range"
    ]


def test_a_request_body_that_breaks_the_document_is_googles_400_and_a_violation(
    gce: ComputeStandin, api: Client
) -> None:
    body = insert_body("vm", scheduling={"maxRunDuration": {"seconds": 60}, "onHostMaint": "x"})
    message = google_error(api.insert(body), 400, "invalid")
    assert message == (
        "Invalid JSON payload received. Unknown name \"onHostMaint\" at 'resource.scheduling': "
        "Cannot find field."
    )
    message = google_error(api.insert(insert_body("vm", diskSizeGb="10")), 400, "invalid")
    assert "Unknown name \"diskSizeGb\" at 'resource'" in message
    found = gce.take_violations()
    assert (
        "request compute.instances.insert: Instance.scheduling: unknown property 'onHostMaint'"
        in found
    )
    assert (
        "request compute.instances.insert: Instance.scheduling.maxRunDuration.seconds: expected "
        "a string (Google's JSON carries 64-bit integers as strings), got 60" in found
    )
    assert gce.instances() == []


def test_an_unknown_query_parameter_is_googles_400_and_a_violation(
    gce: ComputeStandin, api: Client
) -> None:
    message = google_error(api.get(api.zonal(Z, "instances"), pageSize="10"), 400, "invalid")
    assert message == (
        'Invalid JSON payload received. Unknown name "pageSize": Cannot bind query parameter. '
        "Field 'pageSize' could not be found in request message."
    )
    google_error(api.get(api.zonal(Z, "instances"), maxResults="many"), 400, "invalidParameter")
    assert gce.take_violations() == [
        "request compute.instances.list: unknown query parameter 'pageSize'",
        "request compute.instances.list: Invalid value for integer parameter 'maxResults': 'many'",
    ]
    # The standard parameters every method takes are part of the document too.
    ok(api.get(api.zonal(Z, "instances"), alt="json", prettyPrint="false", quotaUser="t"))


def test_a_path_parameter_must_match_its_pattern(api: Client) -> None:
    message = google_error(
        api.get("projects/shoal-test/zones/US-Central1-A"), 400, "invalidParameter"
    )
    assert message.startswith(
        "Invalid value 'US-Central1-A'. Values must match the following regular expression: "
        "'[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?"
    )


def test_the_stand_ins_own_responses_are_checked_too(
    gce: ComputeStandin, api: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = gce.handlers["compute.zones.get"]

    def sloppy(p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        return {**real(p, q, body), "id": 2001, "status": "MAYBE"}

    monkeypatch.setitem(gce.handlers, "compute.zones.get", sloppy)
    ok(api.get(f"projects/{gce.project}/zones/{Z}"))
    assert gce.take_violations() == [
        "response compute.zones.get: Zone.id: expected a string (Google's JSON carries 64-bit "
        "integers as strings), got 2001",
        "response compute.zones.get: Zone.status: 'MAYBE' is not a value of the enum",
    ]


# --- operations and lifecycles ------------------------------------------------------------


def test_insert_is_an_operation_pending_running_done_over_provisioning_staging_running(
    gce: ComputeStandin, api: Client
) -> None:
    gce.timing = SLOW
    op = ok(api.insert(insert_body("vm-1"), requestId=str(uuid.uuid4())))
    assert (op["kind"], op["status"], op["operationType"], op["progress"]) == (
        "compute#operation",
        "PENDING",
        "insert",
        0,
    )
    assert op["targetLink"] == gce.link(f"projects/shoal-test/zones/{Z}/instances/vm-1")
    assert op["zone"] == gce.link(f"projects/shoal-test/zones/{Z}")
    get_op = api.zonal(Z, f"operations/{op['name']}")
    # Not there yet while the operation is PENDING.
    google_error(api.get(api.zonal(Z, "instances/vm-1")), 404, "notFound")

    gce.advance(50)
    assert ok(api.get(get_op))["status"] == "RUNNING"
    vm = ok(api.get(api.zonal(Z, "instances/vm-1")))
    assert vm["status"] == "PROVISIONING" and vm["id"] == op["targetId"]
    assert "natIP" not in vm["networkInterfaces"][0]["accessConfigs"][0]

    gce.advance(50)
    vm = ok(api.get(api.zonal(Z, "instances/vm-1")))
    assert vm["status"] == "STAGING"
    assert vm["networkInterfaces"][0]["accessConfigs"][0]["natIP"].startswith("203.0.113.")
    assert ok(api.get(get_op))["status"] == "RUNNING"

    gce.advance(50)
    done = ok(api.get(get_op))
    assert (done["status"], done["progress"]) == ("DONE", 100)
    assert "error" not in done and {"insertTime", "startTime", "endTime"} <= set(done)
    vm = ok(api.get(api.zonal(Z, "instances/vm-1")))
    assert vm["status"] == "RUNNING" and "lastStartTimestamp" in vm
    # Instances can be read by id too, as Google's API allows.
    assert ok(api.get(api.zonal(Z, f"instances/{vm['id']}")))["name"] == "vm-1"


def test_wait_blocks_until_done(gce: ComputeStandin, api: Client) -> None:
    op = ok(api.insert(insert_body("vm-1")))
    done = ok(api.post(api.zonal(Z, f"operations/{op['name']}/wait")))
    assert done["status"] == "DONE"
    assert len(gce.calls("compute.zoneOperations.wait")) == 1
    assert ok(api.get(api.zonal(Z, "instances/vm-1")))["status"] == "RUNNING"


def test_wait_may_return_before_done_and_is_capped(gce: ComputeStandin, api: Client) -> None:
    gce.timing = SLOW
    op = ok(api.insert(insert_body("vm-1")))
    wait = api.zonal(Z, f"operations/{op['name']}/wait")
    gce.wait_early = 1  # Google: "might return before the default deadline is reached"
    assert ok(api.post(wait))["status"] == "PENDING"
    gce.wait_cap = 0.2
    assert ok(api.post(wait))["status"] == "PENDING"
    gce.advance(150)
    assert ok(api.post(wait))["status"] == "DONE"
    google_error(api.post(api.zonal(Z, "operations/operation-404/wait")), 404, "notFound")


def test_delete_stops_then_removes_the_instance_and_its_auto_delete_disks(
    gce: ComputeStandin, api: Client
) -> None:
    disks = [
        insert_body("vm-1")["disks"][0],
        {"autoDelete": False, "initializeParams": {"diskName": "keep", "diskSizeGb": "20"}},
    ]
    launch(api, "vm-1", disks=disks)
    assert ok(api.get(api.zonal(Z, "disks/keep")))["users"] == [
        gce.link(f"projects/shoal-test/zones/{Z}/instances/vm-1")
    ]
    gce.timing = SLOW
    op = ok(api.delete(api.zonal(Z, "instances/vm-1")))
    assert (op["status"], op["operationType"]) == ("PENDING", "delete")
    gce.advance(50)
    assert ok(api.get(api.zonal(Z, "instances/vm-1")))["status"] == "STOPPING"
    # Another delete while this one runs: Google's "not ready".
    message = google_error(api.delete(api.zonal(Z, "instances/vm-1")), 400, "resourceNotReady")
    assert message == f"The resource 'projects/shoal-test/zones/{Z}/instances/vm-1' is not ready"
    gce.advance(50)
    assert api.wait(op)["status"] == "DONE"
    google_error(api.get(api.zonal(Z, "instances/vm-1")), 404, "notFound")
    google_error(api.get(api.zonal(Z, "disks/vm-1")), 404, "notFound")
    kept = ok(api.get(api.zonal(Z, "disks/keep")))
    assert "users" not in kept or kept["users"] == []
    google_error(api.delete(api.zonal(Z, "instances/vm-1")), 404, "notFound")


def test_delete_during_the_insert_is_not_ready(gce: ComputeStandin, api: Client) -> None:
    gce.timing = SLOW
    ok(api.insert(insert_body("vm-1")))
    gce.advance(50)
    google_error(api.delete(api.zonal(Z, "instances/vm-1")), 400, "resourceNotReady")


def test_the_same_request_id_gets_the_same_operation_and_never_a_second_instance(
    gce: ComputeStandin, api: Client
) -> None:
    request_id = str(uuid.uuid4())
    first = ok(api.insert(insert_body("vm-1"), requestId=request_id))
    again = ok(api.insert(insert_body("vm-1"), requestId=request_id))
    assert again["name"] == first["name"]
    # Whatever the body: the request id alone says "the same request".
    other = ok(api.insert(insert_body("vm-2"), requestId=request_id))
    assert other["name"] == first["name"]
    api.wait(first)
    later = ok(api.insert(insert_body("vm-1"), requestId=request_id))
    assert (later["name"], later["status"]) == (first["name"], "DONE")
    assert [i["name"] for i in gce.instances()] == ["vm-1"]
    assert len(gce.calls("compute.instances.insert")) == 4

    delete_id = str(uuid.uuid4())
    gone = api.wait(ok(api.delete(api.zonal(Z, "instances/vm-1"), requestId=delete_id)))
    # The retried delete of a deleted instance: its operation, not a 404.
    assert (
        ok(api.delete(api.zonal(Z, "instances/vm-1"), requestId=delete_id))["name"]
        == (gone["name"])
    )

    # Past the window the id is forgotten: a new request, refused as the name is taken.
    launch(api, "vm-3")
    gce.advance(gce.request_window + 1)
    google_error(api.insert(insert_body("vm-3"), requestId=request_id), 409, "alreadyExists")


def test_a_request_id_must_be_a_non_zero_uuid(api: Client) -> None:
    for bad in ("retry-1", "00000000-0000-0000-0000-000000000000"):
        message = google_error(api.insert(insert_body("vm-1"), requestId=bad), 400, "invalid")
        assert message.startswith(f"Invalid value for field 'requestId': '{bad}'")


def test_max_run_duration_deletes_the_instance_at_its_deadline(
    gce: ComputeStandin, api: Client
) -> None:
    scheduling = {"maxRunDuration": {"seconds": "7200"}, "instanceTerminationAction": "DELETE"}
    launch(api, "vm-1", scheduling=scheduling)
    vm = ok(api.get(api.zonal(Z, "instances/vm-1")))
    assert vm["scheduling"]["maxRunDuration"] == {"seconds": "7200"}
    assert vm["scheduling"]["instanceTerminationAction"] == "DELETE"
    gce.advance(7000)
    assert ok(api.get(api.zonal(Z, "instances/vm-1")))["status"] == "RUNNING"
    gce.advance(300)
    google_error(api.get(api.zonal(Z, "instances/vm-1")), 404, "notFound")
    google_error(api.get(api.zonal(Z, "disks/vm-1")), 404, "notFound")
    assert ("deleted", f"{Z}/vm-1", "lifetime reached") in gce.events


def test_termination_time_with_stop_terminates_the_instance(
    gce: ComputeStandin, api: Client
) -> None:
    from datetime import UTC, datetime

    when = datetime.fromtimestamp(gce.now() + 3600, UTC).isoformat().replace("+00:00", "Z")
    launch(api, "vm-1", scheduling={"terminationTime": when, "instanceTerminationAction": "STOP"})
    gce.advance(3700)
    vm = ok(api.get(api.zonal(Z, "instances/vm-1")))
    assert vm["status"] == "TERMINATED" and "lastStopTimestamp" in vm
    assert "natIP" not in vm["networkInterfaces"][0]["accessConfigs"][0]


def test_scheduling_rules(api: Client) -> None:
    cases = [
        ({"maxRunDuration": {"seconds": "3600"}}, "resource.scheduling.instanceTerminationAction"),
        (
            {"maxRunDuration": {"seconds": "10"}, "instanceTerminationAction": "DELETE"},
            "resource.scheduling.maxRunDuration.seconds",
        ),
        (
            {
                "maxRunDuration": {"seconds": "60"},
                "terminationTime": "2999-01-01T00:00:00Z",
                "instanceTerminationAction": "DELETE",
            },
            "resource.scheduling.terminationTime",
        ),
        (
            {"terminationTime": "2001-01-01T00:00:00Z", "instanceTerminationAction": "DELETE"},
            "resource.scheduling.terminationTime",
        ),
        (
            {"provisioningModel": "SPOT", "onHostMaintenance": "MIGRATE"},
            "resource.scheduling.onHostMaintenance",
        ),
        (
            {"provisioningModel": "SPOT", "automaticRestart": True},
            "resource.scheduling.automaticRestart",
        ),
    ]
    for scheduling, field in cases:
        message = google_error(
            api.insert(insert_body("vm-1", scheduling=scheduling)), 400, "invalid"
        )
        assert message.startswith(f"Invalid value for field '{field}'"), (scheduling, message)


def test_spot_defaults_and_preemption(gce: ComputeStandin, api: Client) -> None:
    launch(api, "spot-1", scheduling={"provisioningModel": "SPOT"})
    scheduling = ok(api.get(api.zonal(Z, "instances/spot-1")))["scheduling"]
    assert scheduling == {
        "provisioningModel": "SPOT",
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
        "instanceTerminationAction": "STOP",
        "preemptible": False,
    }
    gce.preempt(Z, "spot-1")
    ops = ok(
        api.get(api.zonal(Z, "operations"), filter="operationType = compute.instances.preempted")
    )["items"]
    assert [(o["status"], o["targetLink"].rsplit("/", 1)[-1]) for o in ops] == [("DONE", "spot-1")]
    gce.advance(1)
    assert ok(api.get(api.zonal(Z, "instances/spot-1")))["status"] == "TERMINATED"

    launch(
        api,
        "spot-2",
        scheduling={"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"},
    )
    gce.preempt(Z, "spot-2")
    gce.advance(1)
    google_error(api.get(api.zonal(Z, "instances/spot-2")), 404, "notFound")
    assert ("deleted", f"{Z}/spot-2", "preempted") in gce.events


def test_a_guest_shutdown_terminates(gce: ComputeStandin, api: Client) -> None:
    launch(api, "vm-1")
    gce.shutdown(Z, "vm-1")
    gce.advance(1)
    assert ok(api.get(api.zonal(Z, "instances/vm-1")))["status"] == "TERMINATED"


def test_labels_metadata_and_gpus_as_the_api_reports_them(gce: ComputeStandin, api: Client) -> None:
    disk = {
        "boot": True,
        "autoDelete": True,
        "initializeParams": {
            "sourceImage": "projects/debian-cloud/global/images/family/debian-12",
            "diskSizeGb": "50",
            "labels": {"shoal-allocation": "gcp-1a2b"},
        },
    }
    launch(
        api,
        "gpu-1",
        machine_type="n1-standard-4",
        disks=[disk],
        labels={"shoal-allocation": "gcp-1a2b", "shoal-expires": "1767225600"},
        metadata={"items": [{"key": "startup-script", "value": "#!/bin/sh\necho hi\n"}]},
        guestAccelerators=[
            {
                "acceleratorType": f"zones/{Z}/acceleratorTypes/nvidia-tesla-t4",
                "acceleratorCount": 1,
            }
        ],
        scheduling={"onHostMaintenance": "TERMINATE"},
    )
    vm = ok(api.get(api.zonal(Z, "instances/gpu-1")))
    assert vm["labels"] == {"shoal-allocation": "gcp-1a2b", "shoal-expires": "1767225600"}
    assert vm["metadata"]["items"] == [{"key": "startup-script", "value": "#!/bin/sh\necho hi\n"}]
    assert vm["guestAccelerators"] == [
        {
            "acceleratorType": gce.link(
                f"projects/shoal-test/zones/{Z}/acceleratorTypes/nvidia-tesla-t4"
            ),
            "acceleratorCount": 1,
        }
    ]
    assert vm["disks"][0]["diskSizeGb"] == "50"
    boot = ok(api.get(api.zonal(Z, "disks/gpu-1")))
    assert boot["labels"] == {"shoal-allocation": "gcp-1a2b"}
    assert boot["sourceImage"].endswith("/debian-cloud/global/images/debian-12-bookworm-v20261111")

    # Accelerator-optimized types carry their GPUs, reported the same way.
    launch(api, "l4-1", machine_type="g2-standard-4", scheduling={"onHostMaintenance": "TERMINATE"})
    l4 = ok(api.get(api.zonal(Z, "instances/l4-1")))["guestAccelerators"]
    assert [(g["acceleratorType"].rsplit("/", 1)[-1], g["acceleratorCount"]) for g in l4] == [
        ("nvidia-l4", 1)
    ]


# --- Google's errors ----------------------------------------------------------------------


def test_unknown_zone_machine_type_image_and_accelerator(api: Client) -> None:
    message = google_error(
        api.insert(insert_body("vm-1", "us-central1-z"), "us-central1-z"), 400, "invalid"
    )
    assert message == "Invalid value for field 'zone': 'us-central1-z'. Unknown zone."
    message = google_error(
        api.insert(insert_body("vm-1", machine_type="e2-huge-99")), 400, "invalid"
    )
    assert message == (
        f"Invalid value for field 'resource.machineType': 'zones/{Z}/machineTypes/e2-huge-99'. "
        f"Machine type with name 'e2-huge-99' does not exist in zone '{Z}'."
    )
    message = google_error(api.get(api.zonal(Z, "machineTypes/e2-huge-99")), 404, "notFound")
    assert message == (
        f"The resource 'projects/shoal-test/zones/{Z}/machineTypes/e2-huge-99' was not found"
    )
    image = "projects/debian-cloud/global/images/family/debian-99"
    message = google_error(api.insert(insert_body("vm-1", image=image)), 404, "notFound")
    assert message == f"The resource '{image}' was not found"
    k9 = f"zones/{Z}/acceleratorTypes/nvidia-tesla-k9"
    gpu = [{"acceleratorType": k9, "acceleratorCount": 1}]
    message = google_error(
        api.insert(
            insert_body(
                "vm-1",
                machine_type="n1-standard-4",
                guestAccelerators=gpu,
                scheduling={"onHostMaintenance": "TERMINATE"},
            )
        ),
        404,
        "notFound",
    )
    assert message == (
        f"The resource 'projects/shoal-test/zones/{Z}/acceleratorTypes/nvidia-tesla-k9' was not "
        "found"
    )
    google_error(api.get(f"projects/other-project/zones/{Z}/instances"), 404, "notFound")


def test_gpus_need_terminate_on_host_maintenance(api: Client) -> None:
    message = google_error(
        api.insert(insert_body("vm-1", machine_type="g2-standard-4")), 400, "invalid"
    )
    assert message == "Instances with guest accelerators do not support live migration."


def test_names_labels_and_duplicates(gce: ComputeStandin, api: Client) -> None:
    message = google_error(api.insert(insert_body("Bad_Name")), 400, "invalid")
    assert message.startswith(
        "Invalid value for field 'resource.name': 'Bad_Name' does not match the pattern"
    )
    assert len(gce.take_violations()) == 1  # the document gives the name's pattern
    message = google_error(api.insert(insert_body("vm-1", labels={"owner": "Ann"})), 400, "invalid")
    assert "Label value 'Ann' violates format constraints" in message
    launch(api, "vm-1")
    message = google_error(api.insert(insert_body("vm-1")), 409, "alreadyExists")
    assert message == f"The resource 'projects/shoal-test/zones/{Z}/instances/vm-1' already exists"


def test_credentials(gce: ComputeStandin) -> None:
    for token, reason in ((None, "required"), ("ya29.someone-else", "authError")):
        client = Client(gce, token)
        response = client.get(client.zonal(Z, "instances"))
        google_error(response, 401, reason)
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="https://accounts.google.com/"'
        assert response.json()["error"]["errors"][0]["location"] == "Authorization"
        assert "someone-else" not in response.text
        client.close()


def test_permission_denied_names_the_permission(gce: ComputeStandin, api: Client) -> None:
    gce.deny = {"compute.instances.insert"}
    message = google_error(api.insert(insert_body("vm-1")), 403, "forbidden")
    assert message == (
        f"Required 'compute.instances.create' permission for 'projects/shoal-test/zones/{Z}/"
        "instances'"
    )
    assert gce.instances() == []


def test_rate_limit_and_unavailable_a_given_number_of_times(
    gce: ComputeStandin, api: Client
) -> None:
    gce.fail_http(429, method="compute.instances.list", times=2, retry_after=3)
    for _ in range(2):
        response = api.get(api.zonal(Z, "instances"))
        message = google_error(response, 429, "rateLimitExceeded")
        assert "Queries per minute" in message and response.headers["Retry-After"] == "3"
        assert response.json()["error"]["errors"][0]["domain"] == "usageLimits"
    ok(api.get(api.zonal(Z, "instances")))
    gce.fail_http(503)  # any method
    google_error(api.get(api.zonal(Z, "machineTypes")), 503, "backendError")
    ok(api.get(api.zonal(Z, "machineTypes")))


def test_an_answer_lost_after_the_insert_was_done(gce: ComputeStandin, api: Client) -> None:
    request_id = str(uuid.uuid4())
    gce.fail_http(503, method="compute.instances.insert", apply=True)
    google_error(api.insert(insert_body("vm-1"), requestId=request_id), 503, "backendError")
    gce.fail_http(0, method="compute.instances.insert", apply=True)
    with pytest.raises(httpx.RemoteProtocolError):
        api.insert(insert_body("vm-1"), requestId=request_id)
    retried = ok(api.insert(insert_body("vm-1"), requestId=request_id))
    assert api.wait(retried)["status"] == "DONE" and "error" not in api.wait(retried)
    assert [i["name"] for i in gce.instances()] == ["vm-1"]


# --- operation errors ---------------------------------------------------------------------


def test_pool_exhausted_for_one_zone_and_machine_type(gce: ComputeStandin, api: Client) -> None:
    gce.fail_insert(
        "ZONE_RESOURCE_POOL_EXHAUSTED", zone=Z, machine_type="e2-standard-4", times=None
    )
    done = launch(api, "vm-1", machine_type="e2-standard-4")
    assert (done["status"], done["httpErrorStatusCode"], done["httpErrorMessage"]) == (
        "DONE",
        503,
        "SERVICE UNAVAILABLE",
    )
    error = done["error"]["errors"][0]
    assert error["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert error["message"] == (
        f"The zone 'projects/shoal-test/zones/{Z}' does not have enough resources available to "
        "fulfill the request.  Try a different zone, or try again later."
    )
    details = {k for d in error["errorDetails"] for k in d}
    assert details == {"help", "localizedMessage", "errorInfo"}
    google_error(api.get(api.zonal(Z, "instances/vm-1")), 404, "notFound")
    google_error(api.get(api.zonal(Z, "disks/vm-1")), 404, "notFound")
    assert launch(api, "vm-2", machine_type="e2-standard-4")["error"]  # every time
    assert "error" not in launch(api, "vm-3", "us-central1-b", machine_type="e2-standard-4")
    assert "error" not in launch(api, "vm-4", machine_type="e2-standard-2")

    gce.fail_insert("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")  # the next insert anywhere
    error = launch(api, "vm-5", "europe-west4-b")["error"]["errors"][0]
    assert error["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert error["message"].endswith("'(resource type:compute)'.")
    assert "error" not in launch(api, "vm-6", "europe-west4-b")


def test_quota_exceeded_from_the_regions_quota(gce: ComputeStandin, api: Client) -> None:
    gce.quotas["us-central1"]["CPUS"] = 6.0
    assert "error" not in launch(api, "vm-1", machine_type="e2-standard-4")
    done = launch(api, "vm-2", "us-central1-b", machine_type="e2-standard-4")
    assert (done["httpErrorStatusCode"], done["httpErrorMessage"]) == (403, "FORBIDDEN")
    error = done["error"]["errors"][0]
    assert error["code"] == "QUOTA_EXCEEDED"
    assert error["message"] == "Quota 'CPUS' exceeded.  Limit: 6.0 in region us-central1."
    assert error["errorDetails"][0]["quotaInfo"] == {
        "metricName": "compute.googleapis.com/cpus",
        "limitName": "CPUS-per-project-region",
        "limit": 6.0,
        "dimensions": {"region": "us-central1"},
    }
    google_error(api.get(api.zonal("us-central1-b", "instances/vm-2")), 404, "notFound")
    quotas = region_quotas(api, "us-central1")
    assert (quotas["CPUS"]["usage"], quotas["CPUS"]["limit"]) == (4.0, 6.0)
    # N2 has a CPU quota of its own: it does not take from CPUS.
    assert "error" not in launch(api, "vm-3", machine_type="n2-standard-8")
    project = ok(api.get("projects/shoal-test"))
    assert {q["metric"]: q["usage"] for q in project["quotas"]}["CPUS_ALL_REGIONS"] == 12.0


def test_gpu_quota_and_its_spot_twin(gce: ComputeStandin, api: Client) -> None:
    gce.quotas["us-central1"]["NVIDIA_L4_GPUS"] = 0.0
    terminate = {"onHostMaintenance": "TERMINATE"}
    error = launch(api, "l4-1", machine_type="g2-standard-4", scheduling=terminate)["error"]
    assert error["errors"][0]["message"] == (
        "Quota 'NVIDIA_L4_GPUS' exceeded.  Limit: 0.0 in region us-central1."
    )
    spot = {"provisioningModel": "SPOT"}
    assert "error" not in launch(api, "l4-2", machine_type="g2-standard-4", scheduling=spot)
    quotas = region_quotas(api, "us-central1")
    assert quotas["PREEMPTIBLE_NVIDIA_L4_GPUS"]["usage"] == 1.0
    assert quotas["PREEMPTIBLE_CPUS"]["usage"] == 4.0


def test_scripted_quota_exceeded(gce: ComputeStandin, api: Client) -> None:
    gce.fail_insert("QUOTA_EXCEEDED", metric="GPUS_ALL_REGIONS", limit=4)
    error = launch(api, "vm-1")["error"]["errors"][0]
    assert error["message"] == "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 4.0 globally."
    assert error["errorDetails"][0]["quotaInfo"]["metricName"] == (
        "compute.googleapis.com/gpus_all_regions"
    )
    assert "error" not in launch(api, "vm-2")


# --- lists --------------------------------------------------------------------------------


def test_list_filter_order_pages_and_fields(gce: ComputeStandin, api: Client) -> None:
    for name, owner in (("b-vm", "shoal"), ("a-vm", "shoal"), ("c-vm", "someone")):
        launch(api, name, labels={"shoal-managed-by": owner})
    path = api.zonal(Z, "instances")
    listed = ok(api.get(path, filter='labels.shoal-managed-by = "shoal"'))
    assert [i["name"] for i in listed["items"]] == ["a-vm", "b-vm"]
    assert listed["kind"] == "compute#instanceList" and "nextPageToken" not in listed
    names = []
    page = ok(api.get(path, maxResults="2"))
    names += [i["name"] for i in page["items"]]
    page = ok(api.get(path, maxResults="2", pageToken=page["nextPageToken"]))
    names += [i["name"] for i in page["items"]]
    assert names == ["a-vm", "b-vm", "c-vm"] and "nextPageToken" not in page
    newest = ok(api.get(path, orderBy="creationTimestamp desc"))["items"][0]["name"]
    assert newest == "c-vm"
    google_error(api.get(path, orderBy="status"), 400, "invalid")
    google_error(api.get(path, filter="labels.x = = y"), 400, "invalid")
    partial = ok(api.get(path, fields="items(name,labels),nextPageToken", maxResults="1"))
    assert partial == {
        "items": [{"name": "a-vm", "labels": {"shoal-managed-by": "shoal"}}],
        "nextPageToken": partial["nextPageToken"],
    }
    empty = ok(api.get(api.zonal("us-central1-b", "instances")))
    assert "items" not in empty


def test_aggregated_lists_every_zone_with_warnings_for_the_empty(
    gce: ComputeStandin, api: Client
) -> None:
    launch(api, "vm-1", labels={"shoal-managed-by": "shoal"})
    launch(api, "vm-2", "europe-west4-a")
    got = ok(
        api.get("projects/shoal-test/aggregated/instances", filter="labels.shoal-managed-by:*")
    )
    assert set(got["items"]) == {f"zones/{z}" for zones in gce.regions.values() for z in zones}
    assert [i["name"] for i in got["items"][f"zones/{Z}"]["instances"]] == ["vm-1"]
    warning = got["items"]["zones/europe-west4-a"]["warning"]
    assert warning == {
        "code": "NO_RESULTS_ON_PAGE",
        "message": "There are no results for scope 'zones/europe-west4-a' on this page.",
        "data": [{"key": "scope", "value": "zones/europe-west4-a"}],
    }
    mts = ok(api.get("projects/shoal-test/aggregated/machineTypes", filter="name = a2-highgpu-1g"))
    a2 = mts["items"][f"zones/{Z}"]["machineTypes"][0]
    assert (a2["guestCpus"], a2["memoryMb"], a2["accelerators"]) == (
        12,
        87040,
        [{"guestAcceleratorType": "nvidia-tesla-a100", "guestAcceleratorCount": 1}],
    )
    gpus = ok(api.get("projects/shoal-test/aggregated/acceleratorTypes"))
    assert "nvidia-l4" in {a["name"] for a in gpus["items"][f"zones/{Z}"]["acceleratorTypes"]}


def test_filter_syntax() -> None:
    vm = {
        "name": "vm-1",
        "status": "RUNNING",
        "labels": {"team": "ml", "shoal-expires": "100"},
        "scheduling": {"preemptible": False},
    }
    accepted = [
        "name = vm-1",
        'name = "vm-1"',
        "name = vm-*",
        "name != other",
        "labels.team:*",
        "labels.team = ml AND status = RUNNING",
        "labels.team = ml status = RUNNING",
        "(status = STOPPED) OR (labels.team = ml)",
        "NOT labels.gone:*",
        "-labels.gone:*",
        "name eq vm-.*",
        "name ne other.*",
        "scheduling.preemptible = false",
        "labels.shoal-expires < 200",
        "name : vm",
    ]
    for text in accepted:
        assert parse_filter(text)(vm), text
    for text in ("name = other", "labels.gone:*", "name eq vm", "labels.shoal-expires > 200"):
        assert not parse_filter(text)(vm), text
    with pytest.raises(ValueError):
        parse_filter("name =")
    assert select_fields(
        {"items": {"zones/a": {"instances": [{"name": "x", "id": "1"}]}}}, "items/*/instances(name)"
    ) == {"items": {"zones/a": {"instances": [{"name": "x"}]}}}


# --- the rest of what the driver calls ----------------------------------------------------


def test_serial_port_output_pages_by_byte_offset(gce: ComputeStandin, api: Client) -> None:
    launch(api, "vm-1", metadata={"items": [{"key": "startup-script", "value": "echo hi"}]})
    first = ok(api.get(api.zonal(Z, "instances/vm-1/serialPort")))
    assert first["kind"] == "compute#serialPortOutput" and first["start"] == "0"
    assert "Found startup-script in metadata." in first["contents"]
    assert int(first["next"]) == len(first["contents"].encode())
    gce.console(Z, "vm-1", "startup-script: hello from the workload\n")
    more = ok(api.get(api.zonal(Z, "instances/vm-1/serialPort"), start=first["next"]))
    assert more["contents"] == "startup-script: hello from the workload\n"
    assert more["start"] == first["next"]
    google_error(api.get(api.zonal(Z, "instances/vm-1/serialPort"), port="9"), 400, "invalid")


def test_snapshot_and_image_from_the_boot_disk(gce: ComputeStandin, api: Client) -> None:
    launch(api, "vm-1")
    snap = ok(
        api.post(
            api.zonal(Z, "disks/vm-1/createSnapshot"),
            {"name": "snap-1", "labels": {"shoal-allocation": "a1"}},
        )
    )
    assert snap["operationType"] == "createSnapshot"
    api.wait(snap)
    got = ok(api.get("projects/shoal-test/global/snapshots/snap-1"))
    assert (got["status"], got["labels"]) == ("READY", {"shoal-allocation": "a1"})

    image = {"name": "img-1", "sourceDisk": f"zones/{Z}/disks/vm-1", "family": "shoal-img"}
    message = google_error(
        api.post("projects/shoal-test/global/images", image), 400, "resourceInUseByAnotherResource"
    )
    assert message == (
        f"The disk resource 'projects/shoal-test/zones/{Z}/disks/vm-1' is already being used by "
        f"'projects/shoal-test/zones/{Z}/instances/vm-1'"
    )
    op = ok(api.post("projects/shoal-test/global/images", image, forceCreate="true"))
    assert "zone" not in op and "/global/operations/" in op["selfLink"]
    assert api.wait(op)["status"] == "DONE"
    assert ok(api.get("projects/shoal-test/global/images/img-1"))["status"] == "READY"
    assert ok(api.get("projects/shoal-test/global/images/family/shoal-img"))["name"] == "img-1"
    vm2 = launch(api, "vm-2", image="global/images/family/shoal-img")
    assert "error" not in vm2


def test_catalog_reads(gce: ComputeStandin, api: Client) -> None:
    mt = ok(api.get(api.zonal(Z, "machineTypes/e2-standard-2")))
    assert (mt["guestCpus"], mt["memoryMb"], mt["zone"]) == (2, 8192, Z)
    assert len(ok(api.get(api.zonal(Z, "machineTypes")))["items"]) == len(gce.machine_types)
    assert ok(api.get(api.zonal(Z, "acceleratorTypes/nvidia-l4")))["maximumCardsPerInstance"] == 8
    zones = ok(api.get("projects/shoal-test/zones"))["items"]
    assert {z["name"] for z in zones} == {z for zs in gce.regions.values() for z in zs}
    region = ok(api.get("projects/shoal-test/regions/us-central1"))
    assert len(region["zones"]) == 4 and {q["metric"] for q in region["quotas"]} >= {"CPUS"}
    view = ok(api.get(f"projects/debian-cloud/zones/{Z}/imageFamilyViews/debian-12"))
    assert view["image"]["name"] == "debian-12-bookworm-v20261111"
    assert ok(api.get("projects/shoal-test"))["name"] == "shoal-test"


# --- gcloud -------------------------------------------------------------------------------


def test_gcloud_creates_describes_and_deletes_on_the_stand_in(
    gce: ComputeStandin, gcloud: Gcloud
) -> None:
    created = gcloud.run(
        "compute",
        "instances",
        "create",
        "vm-gcloud",
        f"--zone={Z}",
        "--machine-type=e2-standard-2",
        "--image-family=debian-12",
        "--image-project=debian-cloud",
        "--labels=shoal-managed-by=bench",
        "--metadata=startup-script=echo hi",
        "--format=json",
        log_http=True,
    )
    assert created.returncode == 0, created.stderr[-3000:]
    described = gcloud.run(
        "compute",
        "instances",
        "describe",
        "vm-gcloud",
        f"--zone={Z}",
        "--format=json",
        log_http=True,
    )
    assert described.returncode == 0, described.stderr[-3000:]
    import json

    assert json.loads(described.stdout)["status"] == "RUNNING"
    deleted = gcloud.run(
        "compute", "instances", "delete", "vm-gcloud", f"--zone={Z}", "--quiet", log_http=True
    )
    assert deleted.returncode == 0, deleted.stderr[-3000:]
    uris = created.uris + described.uris + deleted.uris
    assert uris and all(u.startswith(gce.base + "/") for u in uris), uris
    assert TOKEN not in created.stderr + described.stderr + deleted.stderr
    sent = gce.calls("compute.instances.insert")[0].body
    assert sent["labels"] == {"shoal-managed-by": "bench"}
    assert sent["metadata"]["items"] == [{"key": "startup-script", "value": "echo hi"}]
    assert {s.method for s in gce.requests} == {
        "compute.zones.get",
        "compute.projects.get",
        "compute.instances.insert",
        "compute.zoneOperations.wait",
        "compute.instances.get",
        "compute.instances.delete",
    }
    assert all(s.authorized for s in gce.requests)
    assert gce.instance(Z, "vm-gcloud") is None
