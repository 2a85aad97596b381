#!/bin/sh
# The webhook's serving certificate without cert-manager: a CA and a certificate for the
# webhook Service's names made with openssl, the certificate and key stored in the Secret
# webhook.patch.yaml mounts, and the CA written into the ValidatingWebhookConfiguration's
# caBundle (apply webhook.yaml first). Run it again before DAYS have passed.
#
#   NAMESPACE=gpu-governor DAYS=365 sh deploy/kubernetes/webhook-certs.sh
#
# OUT=<folder> keeps the files (ca.crt, tls.crt, tls.key) there instead of a temporary folder.
set -eu

NAMESPACE=${NAMESPACE:-gpu-governor}
SERVICE=${SERVICE:-gpu-governor-webhook}
SECRET=${SECRET:-gpu-governor-webhook-tls}
WEBHOOK=${WEBHOOK:-gpu-governor}
DAYS=${DAYS:-365}
KUBECTL=${KUBECTL:-kubectl}

if [ -n "${OUT:-}" ]; then
    dir=$OUT
    mkdir -p "$dir"
else
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
fi

host="$SERVICE.$NAMESPACE.svc"
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$DAYS" \
    -subj "/CN=$SERVICE CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$host" \
    -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
    "$host" "$host" >"$dir/ext.cnf"
openssl x509 -req -sha256 -days "$DAYS" -in "$dir/tls.csr" -CA "$dir/ca.crt" \
    -CAkey "$dir/ca.key" -CAcreateserial -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null

"$KUBECTL" -n "$NAMESPACE" create secret tls "$SECRET" --cert="$dir/tls.crt" \
    --key="$dir/tls.key" --dry-run=client -o yaml | "$KUBECTL" apply -f -
bundle=$(base64 <"$dir/ca.crt" | tr -d '\n')
"$KUBECTL" patch validatingwebhookconfiguration "$WEBHOOK" --type=json \
    -p "[{\"op\": \"add\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$bundle\"}]"
echo "Certificate for $host stored in secret $NAMESPACE/$SECRET; caBundle set on $WEBHOOK."
