// napi_imports.h: the Node-API functions the pinned dawn.node imports (it is a Node
// addon). wgpt never calls the addon's entry point, so none of them ever runs;
// napi_imports.c defines each as a do-nothing export so that dlopen can bind the
// file. Listed from `readelf --dyn-syms` of webgpu@0.6.2's dawn.node; the loader
// names any import missing here.
#ifndef WGPT_NAPI_IMPORTS_H
#define WGPT_NAPI_IMPORTS_H

#define WGPT_NAPI_IMPORTS(X) \
    X(napi_add_finalizer) \
    X(napi_async_destroy) \
    X(napi_call_function) \
    X(napi_close_callback_scope) \
    X(napi_close_escapable_handle_scope) \
    X(napi_close_handle_scope) \
    X(napi_coerce_to_bool) \
    X(napi_coerce_to_number) \
    X(napi_coerce_to_object) \
    X(napi_coerce_to_string) \
    X(napi_create_array_with_length) \
    X(napi_create_double) \
    X(napi_create_error) \
    X(napi_create_external) \
    X(napi_create_external_arraybuffer) \
    X(napi_create_function) \
    X(napi_create_object) \
    X(napi_create_promise) \
    X(napi_create_range_error) \
    X(napi_create_reference) \
    X(napi_create_string_utf8) \
    X(napi_create_type_error) \
    X(napi_define_class) \
    X(napi_define_properties) \
    X(napi_delete_reference) \
    X(napi_detach_arraybuffer) \
    X(napi_escape_handle) \
    X(napi_fatal_error) \
    X(napi_get_and_clear_last_exception) \
    X(napi_get_array_length) \
    X(napi_get_arraybuffer_info) \
    X(napi_get_boolean) \
    X(napi_get_cb_info) \
    X(napi_get_element) \
    X(napi_get_global) \
    X(napi_get_instance_data) \
    X(napi_get_last_error_info) \
    X(napi_get_named_property) \
    X(napi_get_new_target) \
    X(napi_get_null) \
    X(napi_get_property) \
    X(napi_get_property_names) \
    X(napi_get_reference_value) \
    X(napi_get_typedarray_info) \
    X(napi_get_undefined) \
    X(napi_get_value_bool) \
    X(napi_get_value_double) \
    X(napi_get_value_external) \
    X(napi_get_value_int32) \
    X(napi_get_value_int64) \
    X(napi_get_value_string_utf8) \
    X(napi_get_value_uint32) \
    X(napi_has_property) \
    X(napi_instanceof) \
    X(napi_is_array) \
    X(napi_is_arraybuffer) \
    X(napi_is_exception_pending) \
    X(napi_is_typedarray) \
    X(napi_new_instance) \
    X(napi_open_escapable_handle_scope) \
    X(napi_open_handle_scope) \
    X(napi_reference_unref) \
    X(napi_reject_deferred) \
    X(napi_remove_wrap) \
    X(napi_resolve_deferred) \
    X(napi_run_script) \
    X(napi_set_element) \
    X(napi_set_instance_data) \
    X(napi_set_named_property) \
    X(napi_set_property) \
    X(napi_throw) \
    X(napi_typeof) \
    X(napi_unwrap) \
    X(napi_wrap)

// 1 if name is in the list above.
int wgpt_napi_import_known_(const char *name);

#endif
