# certs.sh: sourced by the compat-test scripts that need TLS material (tls, sasl, sasl/clients, acl). Makes
# throw-away RSA-2048 keys and certificates with openssl, valid two days, SHA-256; no key is checked in. Each
# function runs openssl in DIR, writes into it, and returns non-zero on the first failure.
#   certs_ca DIR NAME SUBJECT            -> NAME.key, NAME.pem: a self-signed CA
#   certs_leaf DIR CA NAME SUBJECT [SAN] -> NAME.key, NAME.pem signed by CA (CA.key, CA.pem in DIR), and
#                                           NAME-keystore.pem (key then certificate: a PEM keystore for
#                                           ssl.keystore.location); SAN, when given, is an openssl
#                                           subjectAltName value
#   certs_server DIR [CA]                -> certs_leaf for the broker: server.*, CN=127.0.0.1 with the SAN
#                                           IP:127.0.0.1,DNS:localhost, signed by CA (default ca)

certs_ca() {
    (cd "$1" && openssl req -x509 -newkey rsa:2048 -nodes -keyout "$2.key" -out "$2.pem" -days 2 -sha256 \
        -subj "$3")
}

certs_leaf() {
    local dir=$1 ca=$2 name=$3 subj=$4 san=${5:-}
    (
        cd "$dir" || exit 1
        local ext=()
        if [ -n "$san" ]; then
            printf 'subjectAltName=%s\n' "$san" >"$name.ext" || exit 1
            ext=(-extfile "$name.ext")
        fi
        openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" &&
            openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial -out "$name.pem" \
                -days 2 -sha256 "${ext[@]}" &&
            cat "$name.key" "$name.pem" >"$name-keystore.pem"
    )
}

certs_server() {
    certs_leaf "$1" "${2:-ca}" server "/CN=127.0.0.1" "IP:127.0.0.1,DNS:localhost"
}
