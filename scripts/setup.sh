#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: Debian packages, the virtualenv, the Python packages.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
STAMP="$VENV/.squall-installed"

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || dpkg -s zookeeper >/dev/null 2>&1 || need_apt+=(zookeeper)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# lazyfs (the brokers' disk that can lose unsynced writes) mounts with libfuse3 and fusermount3.
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
dpkg -s libfuse3-3 >/dev/null 2>&1 || need_apt+=(libfuse3-3)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need Debian packages ${need_apt[*]}; run as root or install them with apt-get" >&2
        exit 1
    fi
    echo "setup: installing Debian packages: ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating virtual environment $VENV"
    "$PYTHON" -m venv "$VENV"
fi

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    echo "setup: installing Python packages"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e '.[dev]'
    touch "$STAMP"
fi
# The editable install leaves squall's own modules uncompiled; where PYTHONDONTWRITEBYTECODE
# is set, every process would compile them again (0.1 s of each `squall check`). Only
# changed modules are compiled.
"$VENV/bin/python" -m compileall -q squall system_under_test nemesis workloads histories checkers >/dev/null
echo "setup: ready"
