// manent-plugin-{{name}}: a manent plugin. `manent plugin test ./manent-plugin-{{name}}` checks it
// against the contract.
package main

import "manent.dev/sdk/go/external"

func main() { external.Serve(factory) }
