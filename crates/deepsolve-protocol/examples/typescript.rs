//! Print the TypeScript definitions of the protocol types (the web UI's `src/protocol.ts`):
//! `cargo run -q -p deepsolve-protocol --example typescript > web/src/protocol.ts`.

fn main() {
    print!("{}", deepsolve_protocol::schema::typescript());
}
