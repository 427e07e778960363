"""`image pull`, `image list`, `image rm`: images in the local images dir."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli import output, tables
from cli.commands.options import JsonOpt, NoHeadersOpt, OutputOpt, QuietOpt
from cli.progress import byte_progress, human_bytes, rate
from cli.state import state
from providers.core.env import ENV_IMAGE_PASSWORD, ENV_IMAGE_USER

app = typer.Typer(
    help="""Pull, list and remove images (unpacked archives).

    They live in the images dir: the config's [image] dir, else the data dir's images/
    (`shoal config` shows which); --out picks another.

    \b
    Examples:
      shoal image pull https://example.com/images/ubuntu-base-22.04.tar.xz
      shoal image list
      shoal image rm ubuntu-base-22.04
    """,
    no_args_is_help=True,
)

OutOpt = Annotated[
    Path | None, typer.Option("--out", help="Images dir (default: the data dir's images/).")
]


def _images_dir(ctx: typer.Context, out: Path | None) -> tuple[Path, dict[str, Any]]:
    from drivers.image.store import image_settings, images_dir

    settings = state(ctx).settings()
    return out or images_dir(settings), image_settings(settings)


@app.command()
def pull(
    ctx: typer.Context,
    url: Annotated[
        str, typer.Argument(help="http(s) URL of a tar archive (.tar, .gz, .xz, .zst, .bz2).")
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
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Download, verify and unpack an image into OUT/NAME-VERSION/.

    The archive is streamed, checked against --sum and unpacked; NAME and VERSION come
    from the file name (ubuntu-base-22.04.tar.xz) unless --name and --version say.

    \b
    Examples:
      shoal image pull https://example.com/images/ubuntu-base-22.04.tar.xz
      shoal image pull https://example.com/base.tar.zst --name base --version 1
      shoal image pull "$URL" --sum "sha256:$DIGEST" --out /srv/images
      shoal image pull "$URL" --user ci --password-stdin < token.txt
    """
    as_json = output.select(as_json, output_format)
    import os

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

    -q (-o name) prints NAME-VERSION, as `image rm` takes it.

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
        output.emit_names(Path(i["path"]).name for i in images)
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
            "Unpacked bytes",
            "Age",
            Col("Checksum", below=True),
            *(["Pulled (UTC)"] if wide else []),
        ],
        [
            [
                i["name"],
                i["version"],
                i["tag"] or None,
                i["bytes_unpacked"],
                age(i["pulled"], now),
                i["checksum"] or None,
                *([i["pulled"]] if wide else []),
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
            metavar="NAME-VERSION", help="The image to remove, as `shoal image list` names it."
        ),
    ],
    out: OutOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Remove an image (waits for a pull of it in progress).

    \b
    Examples:
      shoal image rm ubuntu-base-22.04
      shoal image rm base-1 --out /srv/images --json
    """
    as_json = output.select(as_json, output_format)
    from drivers.image.pull import PullOptions
    from drivers.image.store import remove_image

    out_dir, config = _images_dir(ctx, out)
    opts = PullOptions.from_config(config, out_dir)
    path = remove_image(out_dir, image, opts.lock_timeout_seconds)
    if as_json:
        output.emit_json({"removed": path})
    else:
        output.message(f"removed {path}")
