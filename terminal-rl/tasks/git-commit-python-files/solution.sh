#!/bin/bash
cd /app/repo
git add -- '*.py'
git commit -q -m "Add CSV parser"
