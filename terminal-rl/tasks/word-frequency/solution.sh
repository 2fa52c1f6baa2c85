#!/bin/bash
tr 'A-Z' 'a-z' < /app/book.txt | tr -cs 'a-z' '\n' | grep -v '^$' | sort | uniq -c \
  | awk '{print $1, $2}' | sort -k1,1nr -k2,2 | head -n 10 > /app/top_words.txt
