#!/bin/bash
cd /app
sed -i 's/            numbers.append(int(line))/            if line.strip():\n                numbers.append(float(line))/' stats.py
sed -i 's|return sum(xs) / (len(xs) - 1)|return sum(xs) / len(xs)|' stats.py
sed -i 's|return (xs\[n // 2\] + xs\[n // 2 + 1\]) / 2|return (xs[n // 2 - 1] + xs[n // 2]) / 2|' stats.py
