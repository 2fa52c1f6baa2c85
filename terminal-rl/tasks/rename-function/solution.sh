#!/bin/bash
cd /app/src && sed -i -E 's/\bload_cfg\b/load_config/g' *.py
