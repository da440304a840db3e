package smtp

// Params are the query parameters an smtp:// destination URL accepts:
// api (where its records are), tls, ca and insecure (how this process
// checks the server's certificate) and settle (how long a relay may still
// deliver after a lease). docs/inputs.md classifies each.
var Params = []string{"api", "tls", "ca", "insecure", "settle"}
