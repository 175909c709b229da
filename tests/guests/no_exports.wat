;; A valid core module with a memory but none of the ABI v1 exports (no amber_alloc, no
;; amber_workflow.* / amber_activity.*) and no amber.manifest section. Upload must refuse it.
(module
  (memory (export "memory") 1)
  (func (export "add") (param i32 i32) (result i32)
    local.get 0
    local.get 1
    i32.add))
