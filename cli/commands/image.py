"""`image pull`, `image list`, `image rm`: images in the local images dir."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli import output
from cli.commands.catalog import JsonOpt, OutputOpt
from cli.state import state
from providers.env import ENV_IMAGE_PASSWORD, ENV_IMAGE_USER

app = typer.Typer(
    help="Pull, list and remove images (archives unpacked into the images dir).",
    no_args_is_help=True,
)

OutOpt = Annotated[
    Path | None, typer.Option("--out", help="Images dir (default: the data dir's images/).")
]


def _images_dir(ctx: typer.Context, out: Path | None) -> tuple[Path, dict[str, Any]]:
    from drivers.image.store import images_dir
    from providers.settings import config_section

    settings = state(ctx).settings()
    return out or images_dir(settings), config_section(settings.config, "image")


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
    """Stream-download, verify and unpack an image into OUT/NAME-VERSION/."""
    as_json = output.select(as_json, output_format)
    import os

    from drivers.image import credentials
    from drivers.image.pull import PullOptions
    from drivers.image.pull import pull as do_pull

    out_dir, config = _images_dir(ctx, out)
    stdin_password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None
    login, secret = credentials.resolve(url, user, stdin_password, os.environ)
    opts = PullOptions.from_config(
        config, out_dir, user=login, password=secret, force=force, warn=output.warn
    )
    if lock_timeout is not None:
        opts.lock_timeout_seconds = lock_timeout
    from drivers.image.naming import file_name

    # The file name only: a signed URL's query string carries secrets.
    with output.byte_progress(name or file_name(url)) as progress:
        opts.on_bytes = progress
        result = do_pull(url, sum_, name, version, tag, opts)
    if as_json:
        output.emit_json(result.to_json())
        return
    sys.stdout.write(f"{result.path}\n")
    state_text = (
        "already in place"
        if result.cached
        else (f"{result.bytes_downloaded} bytes in {result.seconds:.1f}s, {result.checksum}")
    )
    output.message(f"{result.name}-{result.version}: {state_text}")


@app.command("list")
def list_(
    ctx: typer.Context,
    out: OutOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """List the images in the images dir."""
    as_json = output.select(as_json, output_format)
    from drivers.image.store import list_images

    out_dir, _ = _images_dir(ctx, out)
    images = list_images(out_dir)
    if as_json:
        output.emit_json(images)
        return
    output.table(
        f"images in {out_dir}",
        ["Name", "Version", "Tag", "Unpacked bytes", "Pulled", "Checksum"],
        [
            [
                i["name"],
                i["version"],
                i["tag"] or None,
                i["bytes_unpacked"],
                i["pulled"],
                i["checksum"][:23] or None,
            ]
            for i in images
        ],
    )


@app.command("rm")
def rm(
    ctx: typer.Context,
    image: Annotated[str, typer.Argument(metavar="NAME-VERSION", help="The image to remove.")],
    out: OutOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Remove an image (waits for a pull of it in progress)."""
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
