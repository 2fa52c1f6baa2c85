#!/bin/bash
set -euo pipefail
cat > /app/backup.sh <<'SH'
#!/bin/bash
# usage: backup.sh SOURCE_DIR DEST_DIR
SRC=$1
DEST=$2
mkdir -p $DEST
count=0
for f in $(ls $SRC | grep .txt); do
  cp $SRC/$f $DEST/$f.bak
  count=$((count+1))
done
echo "copied $count files"
SH
chmod 755 /app/backup.sh
mkdir -p /app/docs
printf 'a\n' > /app/docs/readme.txt
printf 'b\n' > /app/docs/todo.txt
