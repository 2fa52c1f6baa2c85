#!/bin/bash
set -euo pipefail
cat > /app/deploy.sh <<'SH'
#!/bin/bsh
# Deploys the site: writes a release marker. Uses bash arrays, so it needs bash.
set -eu
targets=(web1 web2 web3)
mkdir -p "$(dirname "$0")/release"
for t in "${targets[@]}"; do
  echo "deployed to $t" >> "$(dirname "$0")/release/deploy.txt"
done
echo "deployed ${#targets[@]} targets"
SH
chmod 644 /app/deploy.sh
