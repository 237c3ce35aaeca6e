//! `SHOW CREATE TABLE` text from an FE (any FE a spec names): the PROPERTIES clause, the key
//! model and the table facts are read without a panic.
#![no_main]

use dcs_crds::doris_table::{keys_model_of_ddl, properties_of_ddl, table_info_of_ddl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|ddl: &str| {
    let _ = properties_of_ddl(ddl);
    let _ = keys_model_of_ddl(ddl);
    let _ = table_info_of_ddl(ddl);
});
