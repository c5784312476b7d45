#!/usr/bin/env bash
# Prints edgesight's version: the workspace's, which every crate of it shares
# (`[workspace.package]` in Cargo.toml). The packages, the container images and their tests
# read it here.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(awk -F'"' '/^\[/ { ws = ($0 == "[workspace.package]") } ws && /^version *=/ { print $2; exit }' Cargo.toml)
[ -n "$version" ] || { echo "version.sh: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
echo "$version"
