#!/bin/bash
cat > /app/backup.sh <<'SH'
#!/bin/bash
# usage: backup.sh SOURCE_DIR DEST_DIR
SRC=$1
DEST=$2
mkdir -p -- "$DEST"
count=0
for f in "$SRC"/*.txt; do
  [ -f "$f" ] || continue
  cp -- "$f" "$DEST/$(basename -- "$f").bak"
  count=$((count+1))
done
echo "copied $count files"
SH
chmod 755 /app/backup.sh
