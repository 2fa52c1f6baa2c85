#!/bin/bash
cd /app/server
chmod 700 secrets
chmod 600 secrets/*
find public -type f -exec chmod 644 {} +
find public -type d -exec chmod 755 {} +
chmod 755 bin/*
