#!/bin/bash
sed -i '1s|^#!.*|#!/bin/bash|' /app/deploy.sh
chmod +x /app/deploy.sh
