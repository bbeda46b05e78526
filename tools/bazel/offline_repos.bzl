"""Repository rules for the rule sets Bazel 4.2 would otherwise download (third_party/README.md).

- `grid_stand_in`: a repository made of a folder of third_party/bazel/, found through a
  label of this repository (//third_party:BUILD.bazel), so the rule works the same when
  grid-rbd is the main workspace and when it is an external repository of another one (a
  `local_repository` path would be relative to the consumer).
- `grid_patched_local_repository`: a local folder (a Debian package's tree) linked file by
  file, with named files patched by exact text replacement. Debian's rules_cc 0.0.4 loads
  `use_cpp_toolchain` from @bazel_tools, which Bazel 4.2.3 does not have yet; the patch
  names the C++ toolchain type where it was called (//:workspace.bzl). A replacement whose text is not found fails, so a
  newer package that no longer needs it says so rather than being silently patched.
"""

def _grid_stand_in_impl(rctx):
    folder = rctx.path(Label("//third_party:BUILD.bazel")).dirname.get_child("bazel")
    source = folder.get_child(rctx.attr.folder)
    if not source.exists:
        fail("grid-rbd: no stand-in folder %s" % source)
    for entry in source.readdir():
        rctx.symlink(entry, entry.basename)

grid_stand_in = repository_rule(
    implementation = _grid_stand_in_impl,
    attrs = {"folder": attr.string(mandatory = True, doc = "a folder of third_party/bazel/")},
    doc = "A local stand-in for a repository Bazel 4.2 would download.",
)

def _files_below(rctx, root):
    """Every file below `root`, as paths relative to it (find: Bazel 4.2's path has no
    is_dir)."""
    result = rctx.execute(["find", ".", "-type", "f"], working_directory = str(root))
    if result.return_code != 0:
        fail("grid-rbd: cannot list %s: %s" % (root, result.stderr))
    return sorted([line[2:] for line in result.stdout.splitlines() if line.startswith("./")])

def _grid_patched_local_repository_impl(rctx):
    root = rctx.path(rctx.attr.path)
    if not root.exists:
        fail(("grid-rbd: %s does not exist; install the Debian package that provides it " +
              "(tools/setup.sh does), or declare @%s before grid_rbd_workspace()") %
             (root, rctx.name))
    patched = {}
    for relative, replacements in rctx.attr.patches.items():
        text = rctx.read(rctx.path("%s/%s" % (root, relative)))
        for i in range(0, len(replacements), 2):
            old, new = replacements[i], replacements[i + 1]
            if old not in text:
                fail("grid-rbd: @%s: %s no longer contains the text to patch:\n%s" %
                     (rctx.name, relative, old))
            text = text.replace(old, new)
        patched[relative] = text
    for relative in _files_below(rctx, root):
        if relative in patched:
            rctx.file(relative, patched[relative])
        else:
            rctx.symlink("%s/%s" % (root, relative), relative)

grid_patched_local_repository = repository_rule(
    implementation = _grid_patched_local_repository_impl,
    attrs = {
        "path": attr.string(mandatory = True, doc = "absolute path of the tree"),
        "patches": attr.string_list_dict(
            doc = "relative file -> [old, new, old, new, ...] exact replacements",
        ),
    },
    local = True,
    doc = "A local tree linked file by file, with exact-text patches (see module doc).",
)
