#!/bin/sh
echo "grid-rbd: bazel coverage is not supported (remote_coverage_tools is a local stand-in)." >&2
exit 1
