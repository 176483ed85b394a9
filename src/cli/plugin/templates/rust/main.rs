//! manent-plugin-{{name}}: a manent plugin. `manent plugin test target/debug/manent-plugin-{{name}}`
//! checks it against the contract.

mod deployer;

fn main() {
    manent::plugin::external::serve(deployer::factory)
}
