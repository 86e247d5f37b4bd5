#!/usr/bin/env bash
# The main job. For now: show the device wgpt will train on.
set -euo pipefail
cd "$(dirname "$0")/.."
build/wgpt info
