#!/usr/bin/env bash
# Packs this machine's Bazel 4.2.3 (Debian's bazel-bootstrap) with a minimal Java runtime
# (jlink from the installed JDK 17) and the client's shared libraries into one tarball,
# for a GPU machine that has neither Bazel nor Java nor a network:
#   tools/bazel/make_gpu_kit.sh [out.tar.xz]      (default .bazelkit/bazelkit.tar.xz)
# Unpacked at / it gives /usr/bin/bazel-4, its install base /usr/share/bazel (with the rule
# sets of bazel-rules-cc, bazel-skylib and bazel-platforms that //:workspace.bzl reads:
# tools/setup.sh installs them first), the sandbox tools, /opt/bazelkit/jre and
# /opt/bazelkit/lib; tools/bazel/gpu_bazel_test.sh uses it.
# About 48 MB (xz); .bazelkit/ is git-ignored (carry it to the machine).
set -euo pipefail
out="$(realpath -m "${1:-.bazelkit/bazelkit.tar.xz}")"
jdk="${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}"
for tree in rules/cc tools/skylib tools/platforms; do
  [ -d "/usr/share/bazel/$tree" ] ||
    { echo "no /usr/share/bazel/$tree: run tools/setup.sh (Debian's rule sets) first" >&2; exit 1; }
done
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/usr/share" "$root/usr/libexec/x86_64-linux-gnu" \
  "$root/usr/lib/x86_64-linux-gnu" "$root/opt/bazelkit/lib"
cp -a /usr/bin/bazel-4 "$root/usr/bin/"
cp -a /usr/share/bazel "$root/usr/share/"
cp -a /usr/libexec/x86_64-linux-gnu/bazel "$root/usr/libexec/x86_64-linux-gnu/"
cp -a /usr/lib/x86_64-linux-gnu/bazel "$root/usr/lib/x86_64-linux-gnu/"
# The modules Bazel's server loads; --compress=2 and no debug symbols keep it ~50 MB.
"$jdk/bin/jlink" --add-modules java.base,java.compiler,java.instrument,java.logging,\
java.management,java.management.rmi,java.naming,java.net.http,java.prefs,java.scripting,\
java.security.jgss,java.sql,java.xml,jdk.unsupported,jdk.management,jdk.crypto.ec,\
jdk.zipfs,java.desktop --strip-debug --no-header-files --no-man-pages --compress=2 \
  --output "$root/opt/bazelkit/jre"
# The client's libraries (gRPC, protobuf, abseil...) except the C/C++ runtime the target
# machine has anyway; used through LD_LIBRARY_PATH only.
for binary in /usr/bin/bazel-4 /usr/libexec/x86_64-linux-gnu/bazel/*; do
  ldd "$binary" 2>/dev/null | awk '/=>/ {print $3}'
done | sort -u | grep -vE 'lib(c|m|dl|rt|pthread|z|gcc_s|stdc\+\+)\.so|ld-linux' |
  while read -r lib; do cp -L "$lib" "$root/opt/bazelkit/lib/"; done
mkdir -p "$(dirname "$out")"
tar -C "$root" -cf - . | xz -T0 -6 >"$out"
echo "[make_gpu_kit] $out: $(du -h "$out" | cut -f1)"
