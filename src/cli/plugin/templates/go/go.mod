module manent-plugin-{{name}}

go 1.19

require manent.dev/sdk/go v0.1.0

replace manent.dev/sdk/go => {{sdk}}/sdk/go
