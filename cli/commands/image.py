"""`image pull`, `image list`, `image rm`: images in the local images dir."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli import output, tables
from cli.commands.options import JsonOpt, NoHeadersOpt, OutputOpt, QuietOpt
from cli.progress import byte_progress, human_bytes, rate
from cli.state import state
from providers.core.env import ENV_IMAGE_DIR, ENV_IMAGE_PASSWORD, ENV_IMAGE_USER

app = typer.Typer(
    help="""Pull, list and remove images (from registries, URLs and files).

    They live in the images dir: SHOAL_IMAGE_DIR, the config's [image] dir, else the data
    dir's images/ (`shoal config` shows which); --out picks another.

    \b
    Examples:
      shoal image pull ghcr.io/acme/build-env:3.2
      shoal image pull https://example.com/images/ubuntu-base-22.04.tar.xz
      shoal image list
      shoal image rm ubuntu-base-22.04
    """,
    no_args_is_help=True,
)

OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help=f"Images dir (default: {ENV_IMAGE_DIR}, the config's [image] dir, else the data "
        "dir's images/).",
    ),
]


def _images_dir(ctx: typer.Context, out: Path | None) -> tuple[Path, dict[str, Any]]:
    from drivers.image.store import image_settings, images_dir

    settings = state(ctx).settings()
    return out or images_dir(settings), image_settings(settings)


@app.command()
def pull(
    ctx: typer.Context,
    url: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A registry image (NAME[:TAG], NAME@sha256:..., REGISTRY[:PORT]/PATH:TAG, "
            "docker://REF), an http(s) URL of a tar archive (.tar, .gz, .xz, .zst, .bz2), or "
            "a local archive (a path, file:///PATH).",
        ),
    ],
    sum_: Annotated[
        str,
        typer.Option("--sum", help="Expected checksum ALGO:HEX (sha256, sha512; md5, sha1 warn)."),
    ] = "",
    name: Annotated[
        str,
        typer.Option(
            "--name", help="Image name (default: from the file name, up to the last '-')."
        ),
    ] = "",
    version: Annotated[
        str,
        typer.Option(
            "--version", help="Image version (default: from the file name, after the last '-')."
        ),
    ] = "",
    tag: Annotated[str, typer.Option("--tag", help="Free-form tag recorded with the image.")] = "",
    out: OutOpt = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user", envvar=ENV_IMAGE_USER, help="Basic-auth user (sent to the URL's host only)."
        ),
    ] = None,
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin",
            help=f"Read the password from stdin (or set {ENV_IMAGE_PASSWORD}, or use ~/.netrc).",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Pull again even if the image is in place.")
    ] = False,
    lock_timeout: Annotated[
        float | None,
        typer.Option(
            "--lock-timeout",
            min=0,
            help="Seconds to wait for another pull of the same image (default 600).",
        ),
    ] = None,
    platform: Annotated[
        str,
        typer.Option(
            "--platform",
            help="OS/ARCH[/VARIANT] of a registry image's index to pull (default: this "
            "machine's, e.g. linux/amd64).",
        ),
    ] = "",
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Pull an image from a registry, a URL or a file.

    A registry image (as docker names it) is pulled for --platform, each blob verified
    against its digest and kept once by digest, its layers applied into OUT/oci/sha256-HEX/
    rootfs with its config beside it. An archive (URL or file) is streamed, checked against
    --sum and unpacked into OUT/NAME-VERSION/; NAME and VERSION come from the file name
    (ubuntu-base-22.04.tar.xz) unless --name and --version say.

    \b
    Examples:
      shoal image pull ghcr.io/acme/build-env:3.2 --platform linux/arm64
      shoal image pull https://example.com/images/ubuntu-base-22.04.tar.xz
      shoal image pull "$URL" --sum "sha256:$DIGEST" --out /srv/images
      shoal image pull "$URL" --user ci --password-stdin < token.txt
    """
    as_json = output.select(as_json, output_format)
    import os

    from drivers.image.registry.reference import looks_like_reference

    if looks_like_reference(url):
        _pull_registry(
            ctx, url, platform=platform, out=out, user=user, password_stdin=password_stdin,
            force=force, lock_timeout=lock_timeout, as_json=as_json,
        )  # fmt: skip
        return
    from drivers.image import credentials
    from drivers.image.filesource import local_path
    from drivers.image.pull import PullOptions
    from drivers.image.pull import pull as do_pull

    out_dir, config = _images_dir(ctx, out)
    local = local_path(url)
    stdin_password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None
    if local is not None:
        login, secret = "", ""  # a local file needs none
    else:
        login, secret = credentials.resolve(url, user, stdin_password, os.environ)
    opts = PullOptions.from_config(
        config, out_dir, user=login, password=secret, force=force, warn=output.warn
    )
    if lock_timeout is not None:
        opts.lock_timeout_seconds = lock_timeout
    from drivers.image.naming import file_name

    # The file name only: a signed URL's query string carries secrets.
    shown = local.name if local is not None else file_name(url)
    with byte_progress(name or shown, log_lines=not as_json) as progress:
        opts.on_bytes = progress.update
        opts.on_resume = lambda event: progress.resumed(
            event.cause, event.at, event.attempt, event.attempts
        )
        result = do_pull(url, sum_, name, version, tag, opts)
    if as_json:
        output.emit_json(result.to_json())
        return
    sys.stdout.write(f"{result.path}\n")
    image = f"{result.name}-{result.version}"
    if result.cached:
        output.message(f"{image}: already in place")
        return
    got, took = result.bytes_downloaded, result.seconds
    # Without --sum or an announced checksum there was nothing to check against: say so,
    # and give the digest in full, ready to pin with --sum next time.
    checked = (
        f"verified {result.checksum}" if result.verified else f"{result.checksum} (unverified)"
    )
    from providers.core.timeutil import human_duration

    output.message(
        f"pulled {image}: {human_bytes(got)} in {human_duration(took, style='clock')} "
        f"({rate(got, took)}), {checked}, unpacked "
        f"{human_bytes(result.bytes_unpacked)} in {result.entries:,} entries"
    )


@app.command("list")
def list_(
    ctx: typer.Context,
    out: OutOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """List the images in the images dir.

    -q (-o name) prints what `image rm` takes: NAME-VERSION, or a registry image's reference.

    \b
    Examples:
      shoal image list
      shoal image list --out /srv/images --json
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from drivers.image.store import list_images

    out_dir, _ = _images_dir(ctx, out)
    images = list_images(out_dir)
    if as_json:
        output.emit_json(images)
        return
    if output.names():
        # What `image rm` takes: NAME-VERSION for an archive, the reference for a registry image.
        output.emit_names(i["reference"] or Path(i["path"]).name for i in images)
        return
    from cli.render import age
    from cli.tables import Col
    from providers.core.timeutil import utcnow

    now = utcnow()
    wide = output.wide()
    # The checksum, whole, goes under its image on a narrow terminal; -o wide adds the
    # time of the pull.
    tables.table(
        f"images in {out_dir}",
        [
            "Name",
            "Version",
            "Tag",
            "Size",
            "Age",
            Col("Digest", below=True),
            *(["Platform", "Pulled (UTC)"] if wide else []),
        ],
        [
            [
                i["name"],
                i["version"] or None,
                i["tag"] or None,
                human_bytes(i["bytes_unpacked"]) if i["bytes_unpacked"] is not None else None,
                age(i["pulled"], now),
                i["digest"] or None,
                *([i["platform"], i["pulled"]] if wide else []),
            ]
            for i in images
        ],
    )


@app.command("rm")
def rm(
    ctx: typer.Context,
    image: Annotated[
        str,
        typer.Argument(
            metavar="IMAGE",
            help="The image to remove: NAME-VERSION (an archive), or a registry image's "
            "reference or digest (sha256:..., or 12+ hex digits of it), as `shoal image list` "
            "names it.",
        ),
    ],
    out: OutOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Remove an image (waits for a pull of it in progress).

    A registry image's blobs stay for other images that share them; `image prune` removes
    the ones nothing uses.

    \b
    Examples:
      shoal image rm ubuntu-base-22.04
      shoal image rm base-1 --out /srv/images --json
      shoal image rm ghcr.io/acme/build-env:3.2
    """
    as_json = output.select(as_json, output_format)
    from drivers.image.pull import PullOptions
    from drivers.image.store import remove_any

    out_dir, config = _images_dir(ctx, out)
    opts = PullOptions.from_config(config, out_dir)
    removed = remove_any(out_dir, image, opts.lock_timeout_seconds)
    if as_json:
        # One path, as always; a reference pulled for several platforms names the others.
        output.emit_json({"removed": removed[0], **({"also": removed[1:]} if removed[1:] else {})})
    else:
        for path in removed:
            output.message(f"removed {path}")


@app.command("prune")
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Also remove registry images not pulled or used for this long (7d, 12h, 30m).",
        ),
    ] = None,
    out: OutOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Remove unused registry images and blobs.

    Registry images no reference names any more, blobs no image uses, and what interrupted
    pulls left (a pull in progress keeps its own).

    \b
    Examples:
      shoal image prune
      shoal image prune --older-than 7d
    """
    as_json = output.select(as_json, output_format)
    from drivers.image.pull import PullOptions
    from drivers.image.registry.images import prune as do_prune

    seconds = None
    if older_than is not None:
        from providers.core.timeutil import parse_duration

        seconds = parse_duration(older_than, "--older-than").total_seconds()
    out_dir, config = _images_dir(ctx, out)
    opts = PullOptions.from_config(config, out_dir)
    done = do_prune(out_dir, seconds, opts.lock_timeout_seconds)
    if as_json:
        output.emit_json(done)
        return
    output.message(
        f"removed {len(done['images'])} image(s) and {len(done['blobs'])} unused blob(s) "
        f"from {out_dir}"
    )


def _pull_registry(
    ctx: typer.Context,
    source: str,
    *,
    platform: str,
    out: Path | None,
    user: str | None,
    password_stdin: bool,
    force: bool,
    lock_timeout: float | None,
    as_json: bool,
) -> None:
    """`image pull REF`: drivers.image.registry does the work; this reads the flags,
    shows progress and prints the result."""
    import os

    from drivers.image.extractor import Caps
    from drivers.image.pull import PullOptions
    from drivers.image.registry.client import RegistryClient
    from drivers.image.registry.credentials import find_credential
    from drivers.image.registry.pull import Progress, pull_reference
    from drivers.image.registry.reference import parse_reference

    ref = parse_reference(source)
    out_dir, config = _images_dir(ctx, out)
    opts = PullOptions.from_config(config, out_dir, force=force, warn=output.warn)
    if lock_timeout is not None:
        opts.lock_timeout_seconds = lock_timeout
    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None
    credential = find_credential(
        ref.registry, ref.repository, env=os.environ, home=Path.home(), user=user,
        password=password,
    )  # fmt: skip
    def retrying(seconds: float) -> None:
        if not as_json:
            output.message(
                f"pulling {ref.familiar}: retrying in {seconds:.1f}s (the registry asked to "
                "wait, or the connection dropped)"
            )

    from drivers.image.registry.images import known_scheme, remember_scheme

    hint = known_scheme(out_dir, ref.registry)
    client = RegistryClient(
        ref, credential, insecure=set(config.get("insecure_registries") or ()),
        policy=opts.policy, on_retry=retrying, scheme=hint,
    )  # fmt: skip
    with byte_progress(ref.familiar, log_lines=not as_json) as shown:
        done = [0, 0]  # bytes so far, total

        def on_bytes(n: int) -> None:
            done[0] += n
            shown.update(done[0], done[1] or None)

        def on_total(n: int) -> None:
            done[1] = n

        said = [-10.0]  # when the last waiting line was said (time.monotonic)

        def on_wait(what: str, waited: float) -> None:
            # At once, then every 5 s: a CI log shows a job waiting on another's pull.
            import time

            if not as_json and time.monotonic() - said[0] >= 5:
                said[0] = time.monotonic()
                output.message(
                    f"pulling {ref.familiar}: waiting for another pull of {what} "
                    f"({waited:.0f}s so far)"
                )

        def on_resume(what: str, at: int) -> None:
            if not as_json:
                output.message(f"pulling {ref.familiar}: {what}: resuming at {human_bytes(at)}")

        result = pull_reference(
            ref, client, out_dir, platform or None,
            Caps(opts.max_unpacked_bytes, opts.max_entries), force=force,
            lock_timeout=opts.lock_timeout_seconds,
            progress=Progress(
                on_bytes=on_bytes, on_total=on_total, on_wait=on_wait, on_resume=on_resume
            ),
        )  # fmt: skip
    if client.scheme != hint:
        remember_scheme(out_dir, ref.registry, client.scheme)
    if as_json:
        output.emit_json(result.to_json())
        return
    sys.stdout.write(f"{result.path}\n")
    if result.cached:
        output.message(f"{result.reference}: already in place ({result.digest})")
        return
    from providers.core.timeutil import human_duration

    got, took = result.bytes_downloaded, result.seconds
    output.message(
        f"pulled {result.reference} ({result.platform}): {human_bytes(got)} in "
        f"{human_duration(took, style='clock')} ({rate(got, took)}), {result.layers} layers "
        f"verified, unpacked {human_bytes(result.bytes_unpacked)}; {result.digest}"
    )
