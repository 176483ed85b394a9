//! `remote-copy` as an external plugin binary: the same factory as the built-in, served over
//! go-plugin's protocol.

fn main() {
    manent::plugin::external::serve(manent::plugin::builtin::remote_copy::factory)
}
