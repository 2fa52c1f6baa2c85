#!/bin/bash
cd /app
tar --exclude='*.log' --exclude='site/cache' -czf /app/site-backup.tar.gz site
