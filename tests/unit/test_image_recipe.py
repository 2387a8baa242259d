"""The base image's recipe hash and the apt-sources mirror lookup (no Docker needed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from squall.cluster.image import (
    DEFAULT_RECIPE,
    MIRROR_ENV,
    AptSource,
    ImageBuild,
    ImageBuildError,
    ImagePrerequisiteError,
    NoMirrorError,
    debian_mirror,
    find_mirror,
    parse_deb822_sources,
    parse_one_line_sources,
)

DEB822 = """\
Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 -----END PGP PUBLIC KEY BLOCK-----
"""

ONE_LINE = """\
# comments and blank lines are skipped

deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://vendor.example/apt cloud-sdk-bookworm main
deb http://security.example/debian-security bookworm-security main
deb [ trusted=yes ] http://mirror.example/debian bookworm main contrib # trailing comment
"""


def test_digest_is_stable_and_names_the_tag() -> None:
    assert DEFAULT_RECIPE.digest() == dataclasses.replace(DEFAULT_RECIPE).digest()
    assert DEFAULT_RECIPE.tag == f"squall-base:{DEFAULT_RECIPE.digest()}"
    assert len(DEFAULT_RECIPE.digest()) == 12


def test_digest_changes_with_the_package_list_but_not_its_order() -> None:
    more = dataclasses.replace(DEFAULT_RECIPE, packages=(*DEFAULT_RECIPE.packages, "strace"))
    fewer = dataclasses.replace(DEFAULT_RECIPE, packages=DEFAULT_RECIPE.packages[1:])
    shuffled = dataclasses.replace(
        DEFAULT_RECIPE, packages=tuple(reversed(DEFAULT_RECIPE.packages))
    )
    assert more.digest() != DEFAULT_RECIPE.digest()
    assert fewer.digest() != DEFAULT_RECIPE.digest()
    assert shuffled.digest() == DEFAULT_RECIPE.digest()


@pytest.mark.parametrize(
    "change",
    [
        {"suite": "trixie"},
        {"variant": "buildd"},
        {"entry_script": DEFAULT_RECIPE.entry_script + "# changed\n"},
        {"sshd_config": DEFAULT_RECIPE.sshd_config + "LogLevel DEBUG\n"},
        {"version": DEFAULT_RECIPE.version + 1},
    ],
)
def test_digest_changes_with_every_other_part_of_the_recipe(change: dict[str, Any]) -> None:
    assert dataclasses.replace(DEFAULT_RECIPE, **change).digest() != DEFAULT_RECIPE.digest()


def test_debootstrap_arguments() -> None:
    args = DEFAULT_RECIPE.debootstrap_args(Path("/tmp/rootfs"), "http://mirror.example/debian")
    assert args[:2] == ["debootstrap", "--variant=minbase"]
    assert args[-3:] == ["bookworm", "/tmp/rootfs", "http://mirror.example/debian"]
    included = args[2].removeprefix("--include=").split(",")
    assert {"python3", "openssh-server", "iptables", "iproute2", "procps"} <= set(included)


def test_deb822_sources() -> None:
    sources = parse_deb822_sources(DEB822)
    assert sources == [
        AptSource("http://mirror.example/debian", ("bookworm", "bookworm-updates"), ("main",)),
        AptSource("http://mirror.example/debian-security", ("bookworm-security",), ("main",)),
    ]
    assert find_mirror(sources, "bookworm") == "http://mirror.example/debian"


def test_deb822_skips_disabled_and_source_only_stanzas() -> None:
    text = (
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n"
        "Enabled: no\n\nTypes: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n"
    )
    assert parse_deb822_sources(text) == []


def test_one_line_sources() -> None:
    sources = parse_one_line_sources(ONE_LINE)
    assert [s.uri for s in sources] == [
        "http://vendor.example/apt",
        "http://security.example/debian-security",
        "http://mirror.example/debian",
    ]
    assert sources[-1] == AptSource(
        "http://mirror.example/debian", ("bookworm",), ("main", "contrib")
    )
    # Neither cloud-sdk-bookworm nor bookworm-security is the suite itself.
    assert find_mirror(sources, "bookworm") == "http://mirror.example/debian"
    assert find_mirror(sources, "trixie") is None


def test_mirror_from_files_of_both_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    listing = tmp_path / "sources.list"
    listing.write_text("deb http://vendor.example/apt stable main\n")
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "debian.sources").write_text(DEB822)
    (parts / "ignored.save").write_text("deb http://wrong.example/debian bookworm main\n")
    assert debian_mirror("bookworm", locations=(listing, parts)) == "http://mirror.example/debian"
    (parts / "debian.sources").unlink()
    (parts / "old.list").write_text(ONE_LINE)
    assert debian_mirror("bookworm", locations=(listing, parts)) == "http://mirror.example/debian"


def test_no_mirror_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    listing = tmp_path / "sources.list"
    listing.write_text("deb http://vendor.example/apt stable main\n")
    with pytest.raises(NoMirrorError, match=f"bookworm main.*{MIRROR_ENV}"):
        debian_mirror("bookworm", locations=(listing, tmp_path / "absent.d"))
    monkeypatch.setenv(MIRROR_ENV, "http://override.example/debian")
    assert debian_mirror("bookworm", locations=(listing,)) == "http://override.example/debian"


def test_build_prerequisites_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = ImageBuild(None, DEFAULT_RECIPE, tmp_path, None)
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(
        ImagePrerequisiteError, match=r"`make setup` or `apt-get install debootstrap`"
    ):
        build._check_prerequisites()
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(ImagePrerequisiteError, match=r"needs root"):
        build._check_prerequisites()


def test_credentials_in_urls_are_redacted() -> None:
    from squall.cluster.image import redact

    assert redact("from http://user:s3cret@mirror.example/debian (log)") == (
        "from http://***@mirror.example/debian (log)"
    )
    assert redact("https://token@m.example/x and ftp://a:b@c.example/") == (
        "https://***@m.example/x and ftp://***@c.example/"
    )
    assert redact("http://mirror.example/debian user@host") == (
        "http://mirror.example/debian user@host"
    )


def test_a_mirror_with_credentials_never_reaches_messages_or_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: the mirror (and debootstrap's errors naming it) shown without user:pass@."""
    mirror = "http://builder:s3cret@mirror.example/debian"
    monkeypatch.setenv(MIRROR_ENV, mirror)
    failing = ["sh", "-c", f'echo "E: Failed getting release file {mirror}/dists/bookworm"; exit 1']
    monkeypatch.setattr(type(DEFAULT_RECIPE), "debootstrap_args", lambda self, target, m: failing)
    said: list[str] = []
    build = ImageBuild(None, DEFAULT_RECIPE, tmp_path, said.append)
    monkeypatch.setattr(build, "_check_prerequisites", lambda: None)
    with pytest.raises(ImageBuildError) as raised:
        build.run()
    log = build.log.read_text()
    for text in [*said, str(raised.value), log]:
        assert "s3cret" not in text and "builder" not in text, text
    assert "from http://***@mirror.example/debian" in said[0]
    assert "Failed getting release file http://***@mirror.example/debian" in str(raised.value)
    assert "Failed getting release file http://***@mirror.example/debian" in log
