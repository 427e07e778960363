"""Every exit code the CLI documents, produced for real, and the one mapping table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli.exit_codes import ExitCode, exit_code_for
from providers import registry as catalog
from providers.core import errors
from providers.core.settings import Settings
from providers.core.wire import WireError

Register = Callable[[str, Callable[[Settings], catalog.Catalog]], None]


@pytest.fixture
def register_provider() -> Iterator[Register]:
    """providers.registry.register, undone after the test."""
    added: list[str] = []

    def register(name: str, factory: Callable[[Settings], catalog.Catalog]) -> None:
        catalog.register(name, factory)
        added.append(name)

    yield register
    for name in added:
        catalog._REGISTRY._registered.pop(name, None)


def raising(exc: BaseException) -> Callable[[Settings], catalog.Catalog]:
    def factory(settings: Settings) -> catalog.Catalog:
        assert isinstance(settings, Settings)  # built from the CLI's environment
        raise exc

    return factory


def assert_one_error_line(stderr: str, *expected: str) -> None:
    errors_ = [line for line in stderr.splitlines() if line.startswith("shoal: error: ")]
    assert len(errors_) == 1, stderr
    for text in expected:
        assert text in errors_[0]


def test_0_ok(cli) -> None:
    run = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert run.exit_code == ExitCode.OK == 0
    assert run.stdout.strip().startswith("test-")
    assert "error" not in run.stderr


def test_1_error_unknown_allocation(cli) -> None:
    run = cli("free", "test-deadbeef")
    assert run.exit_code == ExitCode.ERROR == 1
    assert_one_error_line(run.stderr, "test-deadbeef")
    assert run.stdout == ""


def test_2_usage(cli) -> None:
    run = cli("alloc", "--driver", "test", "--cpu", "0", "--ram", "1")
    assert run.exit_code == ExitCode.USAGE == 2
    assert_one_error_line(run.stderr, "resources.cpu")
    assert run.stdout == ""


def test_69_provider_unreachable(cli, register_provider: Register) -> None:
    register_provider(
        "shoal-test-down",
        raising(errors.ProviderUnreachableError("api.example.invalid did not answer")),
    )
    run = cli("regions", "--provider", "shoal-test-down")
    assert run.exit_code == ExitCode.UNREACHABLE == 69
    assert_one_error_line(run.stderr, "did not answer")
    assert run.stdout == ""


def test_75_no_capacity(cli, write_config: Callable[[str], Path]) -> None:
    write_config('[drivers."test/default"]\ncpu_limit = 1\n')
    assert cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1").exit_code == 0
    run = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert run.exit_code == ExitCode.RETRYABLE == 75
    assert_one_error_line(run.stderr, "no capacity")
    assert run.stdout == ""


def test_77_credentials(cli, register_provider: Register) -> None:
    register_provider(
        "shoal-test-locked",
        raising(errors.CredentialsError("set SHOAL_TEST_TOKEN to an API token")),
    )
    run = cli("regions", "--provider", "shoal-test-locked")
    assert run.exit_code == ExitCode.CREDENTIALS == 77
    assert_one_error_line(run.stderr, "SHOAL_TEST_TOKEN")
    assert run.stdout == ""


def test_78_broken_config(cli, write_config: Callable[[str], Path]) -> None:
    path = write_config('[drivers."test/default"\ncpu_limit = \n')
    for args in (("regions",), ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")):
        run = cli(*args)
        assert run.exit_code == ExitCode.CONFIG == 78
        assert_one_error_line(run.stderr, str(path))
        assert run.stdout == ""


def test_78_missing_home(cli, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-home"
    run = cli("status", env={"SHOAL_HOME": str(missing)})
    assert run.exit_code == ExitCode.CONFIG == 78
    assert_one_error_line(run.stderr, "SHOAL_HOME", str(missing))
    assert not missing.exists()


def test_78_bad_driver_config(cli, write_config: Callable[[str], Path]) -> None:
    write_config('[drivers."test/default"]\ncpu_limit = "lots"\n')
    run = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert run.exit_code == 78
    assert_one_error_line(run.stderr, "cpu_limit")


def test_130_interrupted(cli, register_provider: Register) -> None:
    register_provider("shoal-test-ctrl-c", raising(KeyboardInterrupt()))
    run = cli("regions", "--provider", "shoal-test-ctrl-c")
    assert run.exit_code == ExitCode.INTERRUPTED == 130
    assert_one_error_line(run.stderr, "interrupted")


def wrapped_interrupt() -> RuntimeError:
    """What Python raises when Ctrl-C lands while a class is built (a dataclass field's
    __set_name__ during an import): a RuntimeError caused by the KeyboardInterrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
        error = RuntimeError("Error calling __set_name__ on 'Field' instance 'allocated'")
        error.__cause__ = interrupt
        return error


def test_130_interrupted_while_a_class_was_built(cli, register_provider: Register) -> None:
    register_provider("shoal-test-ctrl-c-import", raising(wrapped_interrupt()))
    run = cli("regions", "--provider", "shoal-test-ctrl-c-import", env={"SHOAL_DEBUG": None})
    assert run.exit_code == ExitCode.INTERRUPTED == 130
    assert_one_error_line(run.stderr, "interrupted")


def test_help_documents_every_exit_code(cli) -> None:
    run = cli("--help")
    assert run.exit_code == 0
    text = " ".join(run.stdout.split())
    for code in ExitCode:
        assert f"{int(code)} " in text, code


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.ShoalError("x"), ExitCode.ERROR),
        (errors.NotFoundError("x"), ExitCode.ERROR),
        (errors.LedgerCorruptError("x"), ExitCode.ERROR),
        (errors.UsageError("x"), ExitCode.USAGE),
        (errors.UnknownNameError("driver", "x", ["a"]), ExitCode.USAGE),
        (WireError("a.b", "x"), ExitCode.USAGE),
        (errors.ConfigError("x"), ExitCode.CONFIG),
        (errors.CredentialsError("x"), ExitCode.CREDENTIALS),
        (errors.ProviderUnreachableError("x"), ExitCode.UNREACHABLE),
        (errors.RetryableError("x"), ExitCode.RETRYABLE),
        (errors.NoCapacityError("x"), ExitCode.RETRYABLE),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED),
        (RuntimeError("x"), ExitCode.ERROR),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(int(v)),
)
def test_exit_code_for(exc: BaseException, code: ExitCode) -> None:
    assert exit_code_for(exc) == code


def test_exit_code_values_are_the_documented_ones() -> None:
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "ERROR": 1,
        "USAGE": 2,
        "UNREACHABLE": 69,
        "RETRYABLE": 75,
        "CREDENTIALS": 77,
        "CONFIG": 78,
        "INTERRUPTED": 130,
    }


def test_1_unexpected_error_is_one_line_without_debug(cli, register_provider: Register) -> None:
    register_provider("buggy", raising(RuntimeError("boom")))
    run = cli("regions", "--provider", "buggy", env={"SHOAL_DEBUG": ""})
    assert run.exit_code == ExitCode.ERROR
    assert_one_error_line(run.stderr, "unexpected RuntimeError: boom", "SHOAL_DEBUG=1")
    assert "Traceback" not in run.stderr
    with pytest.raises(RuntimeError, match="boom"):  # SHOAL_DEBUG=1: the traceback
        cli("regions", "--provider", "buggy")


@pytest.mark.parametrize(
    "argv",
    [("nosuchcmd",), ("regions", "--bogus"), ("pricing", "--limit", "0"), ("alloc", "--cpu")],
    ids=["unknown-command", "unknown-option", "out-of-range", "missing-value"],
)
def test_2_framework_usage_errors_without_debug(cli, argv: tuple[str, ...]) -> None:
    # Without SHOAL_DEBUG, the catch-all for unforeseen errors must not swallow the
    # framework's own usage errors (click's exceptions) into "unexpected ..." exit 1.
    run = cli(*argv, env={"SHOAL_DEBUG": ""})
    assert run.exit_code == ExitCode.USAGE
    assert "unexpected" not in run.stderr
