//! QuickJS (quickjs-ng, as the `rquickjs-sys` crate ships it) with wasbox's changes to its C:
//! the crate is fetched by cargo from crates.io (pinned by version and SHA-256), copied under
//! the guests' target directory with the edits below applied, and given to the guests' build
//! as a `[patch]` of the crates.io one. Each edit names the text it replaces, which must occur
//! exactly once: a new QuickJS that moved it fails the build here, not at run time.
//!
//! What the edits buy (instructions counted by `valgrind --tool=callgrind` on a native build,
//! `server/src/bench/kernels.js` at scale 1): `objects` 1.41 G -> 0.47 G, `classes` 1.29 G ->
//! 0.69 G. See PERFORMANCE.md for the times in the sandbox.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest as _;

const CRATE: &str = "rquickjs-sys";
const VERSION: &str = "0.14.0";
/// QuickJS's source in the crate.
const C: &str = "quickjs/quickjs.c";
/// SHA-256 of `rquickjs-sys-0.14.0.crate` as crates.io serves it.
const SHA256: &str = "cee271d0eeba64f0915b846cb7ae02e16faf3dfdffdca91731101d9d30fe3423";

/// One change to a file of the crate: `old` (found exactly once) becomes `new`.
struct Edit {
    /// The file, relative to the crate's root.
    file: &'static str,
    why: &'static str,
    old: &'static str,
    new: &'static str,
}

/// Object literals of named properties made in one op: the parser's helpers.
const OBJECT_TEMPLATE: &str = r#"/* wasbox: an object literal whose properties are all 'name: value' or
   shorthand 'name', with distinct names, is made in one op once its values
   are on the stack: object_template n idx (object_shape after phase 3) makes
   an object of the shape of cpool[idx], a template object with those
   properties in that order and undefined values. Its shape is the one
   define_field after define_field would have reached, shared with every
   object of those properties. The parser emits object and define_field as
   always; wb_object_field records each define_field and wb_object_template
   erases them and the object op (the values' code stays where it is, so the
   values are evaluated in the same order). Nothing can observe an object
   literal before it is complete. */
#define WB_OBJECT_TEMPLATE_MAX 32

/* after a property of the literal: its define_field recorded in pos[n] and
   n + 1 returned, or -1 once the literal cannot be made from a template (a
   spread, method, accessor, computed name, __proto__, repeated name, or more
   than WB_OBJECT_TEMPLATE_MAX properties) */
static int wb_object_field(JSParseState *s, int *pos, int n)
{
    JSFunctionDef *fd = s->cur_func;
    JSAtom atom;
    int i;

    if (n < 0 || n >= WB_OBJECT_TEMPLATE_MAX ||
        get_prev_opcode(fd) != OP_define_field)
        return -1;
    atom = get_u32(fd->byte_code.buf + fd->last_opcode_pos + 1);
    for (i = 0; i < n; i++) {
        if (get_u32(fd->byte_code.buf + pos[i] + 1) == atom)
            return -1;
    }
    pos[n] = fd->last_opcode_pos;
    return n + 1;
}

/* at the literal's end: when n properties were recorded, the template in the
   constant pool, the object and define_field ops erased and object_template
   emitted. -1 only when out of memory. */
static int wb_object_template(JSParseState *s, int object_pos, const int *pos,
                              int n)
{
    JSContext *ctx = s->ctx;
    JSFunctionDef *fd = s->cur_func;
    uint8_t *bc;
    JSValue tmpl;
    int i, idx;

    if (n <= 0 || fd->cpool_count > 0xffff || dbuf_error(&fd->byte_code) ||
        fd->byte_code.buf[object_pos] != OP_object)
        return 0;
    tmpl = JS_NewObject(ctx);
    if (JS_IsException(tmpl))
        return -1;
    for (i = 0; i < n; i++) {
        if (JS_DefinePropertyValue(ctx, tmpl,
                                   get_u32(fd->byte_code.buf + pos[i] + 1),
                                   JS_UNDEFINED, JS_PROP_C_W_E) < 0) {
            JS_FreeValue(ctx, tmpl);
            return -1;
        }
    }
    if (!JS_VALUE_GET_OBJ(tmpl)->shape->is_hashed) {
        JS_FreeValue(ctx, tmpl);
        return 0;
    }
    idx = cpool_add(s, tmpl);
    if (idx < 0) {
        JS_FreeValue(ctx, tmpl);
        return -1;
    }
    bc = fd->byte_code.buf;
    bc[object_pos] = OP_nop;
    for (i = 0; i < n; i++) {
        JS_FreeAtom(ctx, get_u32(bc + pos[i] + 1));
        memset(bc + pos[i], OP_nop, opcode_info[OP_define_field].size);
    }
    emit_op(s, OP_object_template);
    emit_u16(s, n);
    emit_u16(s, idx);
    return 0;
}

static __exception int js_parse_object_literal(JSParseState *s)
{"#;

/// The interpreter's `object_shape`, its work in a function of its own (inline, the interpreter's
/// loop grows and Cranelift keeps less of it in registers: `classes` took 8% longer).
const OBJECT_SHAPE_OP: &str = r#"        CASE(OP_object_shape):
            {
                /* wasbox: see wb_object_template and wb_object_shape */
                int n = get_u16(pc);
                JSValue obj;
                obj = wb_object_shape(ctx, JS_VALUE_GET_OBJ(b->cpool[get_u16(pc + 2)]),
                                      n, sp - n);
                pc += 4;
                if (unlikely(JS_IsException(obj)))
                    goto exception;
                sp -= n;
                *sp++ = obj;
            }
            BREAK;
        CASE(OP_special_object):
"#;

/// `wb_object_shape`, before the interpreter.
const OBJECT_SHAPE_FN: &str = r#"/* wasbox: the object of an object literal made from the template 'tp' (see
   wb_object_template) with the n values at 'vals', which it takes; those it
   has not taken when it fails are left for the caller to free */
static no_inline JSValue wb_object_shape(JSContext *ctx, JSObject *tp, int n,
                                         JSValue *vals)
{
    JSShape *sh = tp->shape;
    JSShapeProperty *prs;
    JSObject *p;
    JSValue obj;
    int i;

    /* the template's shape, when it is still one objects of this realm
       can share */
    if (likely(sh->is_hashed && sh->prop_count == n &&
               sh->proto == JS_VALUE_GET_OBJ(ctx->class_proto[JS_CLASS_OBJECT]))) {
        obj = JS_NewObjectFromShape(ctx, js_dup_shape(sh), JS_CLASS_OBJECT, NULL);
        if (unlikely(JS_IsException(obj)))
            return obj;
        p = JS_VALUE_GET_OBJ(obj);
        for (i = 0; i < n; i++)
            p->prop[i].u.value = vals[i];
        return obj;
    }
    obj = JS_NewObject(ctx);
    if (unlikely(JS_IsException(obj)))
        return obj;
    prs = get_shape_prop(sh);
    for (i = 0; i < n; i++) {
        int ret = JS_DefinePropertyValue(ctx, obj, prs[i].atom, vals[i],
                                         JS_PROP_C_W_E | JS_PROP_THROW);
        vals[i] = JS_UNDEFINED;
        if (ret < 0) {
            JS_FreeValue(ctx, obj);
            return JS_EXCEPTION;
        }
    }
    return obj;
}

static JSValue JS_CallInternal(JSContext *caller_ctx, JSValueConst func_obj,
"#;

/// Loops tested at the bottom: the parser's helpers.
const LOOP_ROTATION: &str = r#"/* wasbox: a while or for loop whose test is short straight-line code ends
   each round with a copy of the test and a jump back into the body when it
   holds (if_true), instead of a jump back to the test: one op fewer a round.
   The first round still runs the test at the top. Straight-line: no op with
   a label (so no &&, ||, ?:, optional chain or yield), no closure, class,
   scope or eval, at most 64 bytes; its atoms are taken again for the copy. */
static bool wb_loop_test_copyable(JSParseState *s, int start, int end)
{
    const uint8_t *bc = s->cur_func->byte_code.buf;
    int pos, op;

    if (start <= 0 || end <= start || end - start > 64 ||
        dbuf_error(&s->cur_func->byte_code))
        return false;
    for (pos = start; pos < end; pos += opcode_info[op].size) {
        op = bc[pos];
        switch (opcode_info[op].fmt) {
        case OP_FMT_label:
        case OP_FMT_label8:
        case OP_FMT_label16:
        case OP_FMT_label_u16:
        case OP_FMT_atom_label_u8:
        case OP_FMT_atom_label_u16:
            return false;
        default:
            break;
        }
        switch (op) {
        case OP_invalid:
        case OP_label:
        case OP_fclosure:
        case OP_enter_scope:
        case OP_leave_scope:
        case OP_dispose_scope:
        case OP_set_class_name:
        case OP_define_class:
        case OP_define_class_computed:
        case OP_eval:
        case OP_apply_eval:
            return false;
        default:
            break;
        }
    }
    return pos == end;
}

/* at the end of a round: the test copied and if_true to 'body'; false (and
   nothing emitted) when the round's end cannot be reached or the test cannot
   be copied */
static bool wb_loop_test_at_end(JSParseState *s, int body, int start, int end)
{
    JSFunctionDef *fd = s->cur_func;
    DynBuf *bc = &fd->byte_code;
    int pos, op, last = -1, at;

    if (body < 0 || !js_is_live_code(s) || !wb_loop_test_copyable(s, start, end))
        return false;
    if (dbuf_claim(bc, end - start))
        return false;
    at = bc->size;
    memcpy(bc->buf + at, bc->buf + start, end - start);
    bc->size += end - start;
    for (pos = at; pos < bc->size; pos += opcode_info[op].size) {
        op = bc->buf[pos];
        switch (opcode_info[op].fmt) {
        case OP_FMT_atom:
        case OP_FMT_atom_u8:
        case OP_FMT_atom_u16:
            JS_DupAtom(s->ctx, get_u32(bc->buf + pos + 1));
            break;
        default:
            break;
        }
        if (op != OP_source_loc && op != OP_nop)
            last = pos;
    }
    fd->last_opcode_pos = last;
    emit_goto(s, OP_if_true, body);
    return true;
}

/* allow the 'in' binary operator */
#define PF_IN_ACCEPTED"#;

/// The interpreter's `binop_k`.
const BINOP_K_OP: &str = r#"        CASE(OP_binop_k):
            {
                /* wasbox: sp[-1] op k, k an int16: what push_i32(k) and op
                   would leave, int and float operands inline, anything
                   else through the op's own slow path */
                int sub = pc[0], ret;
                int32_t k = (int16_t)get_u16(pc + 1), v;
                int64_t r;
                double d;
                JSValue op1 = sp[-1];
                bool done = true;

                pc += 4;
                if (likely(JS_VALUE_GET_TAG(op1) == JS_TAG_INT)) {
                    v = JS_VALUE_GET_INT(op1);
                    switch (sub) {
                    case OP_add:
                        r = (int64_t)v + k;
                        sp[-1] = r == (int32_t)r ? js_int32(r) : js_float64(r);
                        break;
                    case OP_sub:
                        r = (int64_t)v - k;
                        sp[-1] = r == (int32_t)r ? js_int32(r) : js_float64(r);
                        break;
                    case OP_mul:
                        r = (int64_t)v * k;
                        if (unlikely(r == 0 && (v | k) < 0))
                            sp[-1] = js_float64(-0.0);
                        else
                            sp[-1] = r == (int32_t)r ? js_int32(r) : js_float64(r);
                        break;
                    case OP_div:
                        sp[-1] = js_number((double)v / (double)k);
                        break;
                    case OP_mod:
                        /* not v < 0 (a -0 result), not k <= 0 */
                        if (v < 0 || k <= 0)
                            done = false;
                        else
                            sp[-1] = js_int32(v % k);
                        break;
                    case OP_and: sp[-1] = js_int32(v & k); break;
                    case OP_or: sp[-1] = js_int32(v | k); break;
                    case OP_xor: sp[-1] = js_int32(v ^ k); break;
                    case OP_shl: sp[-1] = js_int32((int32_t)((uint32_t)v << (k & 31))); break;
                    case OP_sar: sp[-1] = js_int32(v >> (k & 31)); break;
                    case OP_shr: sp[-1] = js_uint32((uint32_t)v >> (k & 31)); break;
                    case OP_lt: sp[-1] = js_bool(v < k); break;
                    case OP_lte: sp[-1] = js_bool(v <= k); break;
                    case OP_gt: sp[-1] = js_bool(v > k); break;
                    case OP_gte: sp[-1] = js_bool(v >= k); break;
                    case OP_eq:
                    case OP_strict_eq: sp[-1] = js_bool(v == k); break;
                    case OP_neq:
                    case OP_strict_neq: sp[-1] = js_bool(v != k); break;
                    default: done = false; break;
                    }
                } else if (JS_TAG_IS_FLOAT64(JS_VALUE_GET_TAG(op1))) {
                    d = JS_VALUE_GET_FLOAT64(op1);
                    switch (sub) {
                    case OP_add: sp[-1] = js_float64(d + k); break;
                    case OP_sub: sp[-1] = js_float64(d - k); break;
                    case OP_mul: sp[-1] = js_float64(d * k); break;
                    case OP_div: sp[-1] = js_number(d / k); break;
                    case OP_lt: sp[-1] = js_bool(d < k); break;
                    case OP_lte: sp[-1] = js_bool(d <= k); break;
                    case OP_gt: sp[-1] = js_bool(d > k); break;
                    case OP_gte: sp[-1] = js_bool(d >= k); break;
                    case OP_eq:
                    case OP_strict_eq: sp[-1] = js_bool(d == k); break;
                    case OP_neq:
                    case OP_strict_neq: sp[-1] = js_bool(d != k); break;
                    default: done = false; break;
                    }
                } else {
                    done = false;
                }
                if (unlikely(!done)) {
                    *sp++ = js_int32(k);
                    sf->cur_pc = pc;
                    switch (sub) {
                    case OP_add:
                        ret = js_add_slow(ctx, sp);
                        break;
                    case OP_sub: case OP_mul: case OP_div: case OP_mod:
                        ret = js_binary_arith_slow(ctx, sp, sub);
                        break;
                    case OP_and: case OP_or: case OP_xor: case OP_shl: case OP_sar:
                        ret = js_binary_logic_slow(ctx, sp, sub);
                        break;
                    case OP_shr:
                        ret = js_shr_slow(ctx, sp);
                        break;
                    case OP_lt: case OP_lte: case OP_gt: case OP_gte:
                        ret = js_relational_slow(ctx, sp, sub);
                        break;
                    case OP_eq: case OP_neq:
                        ret = js_eq_slow(ctx, sp, sub == OP_neq);
                        break;
                    default:
                        ret = js_strict_eq_slow(ctx, sp, sub == OP_strict_neq);
                        break;
                    }
                    if (ret)
                        goto exception;
                    sp--;
                }
            }
            BREAK;
        CASE(OP_add_loc):
"#;

/// What a failed call called, named as V8 names it.
const CALLEE_NAME: &str = r#"/* wasbox: V8 names what was called in "x is not a function" (x, o.m,
   this.f, a.b.c, f(...)); QuickJS did not. On that error only, the calling
   frame's bytecode is followed from its start to the call op, keeping which
   op pushed each stack slot (and, at each jump target, the depth the jump
   left), and the op that pushed the callee is named: a variable, `this`, a
   property read of something named, or a call of something named. False,
   with nothing thrown, when it cannot tell. */
static bool wb_name_pushed(JSContext *ctx, JSFunctionBytecode *b, const int *src,
                           int q, char *buf, size_t size, int level)
{
    const uint8_t *bc = b->byte_code_buf;
    char atom_buf[ATOM_GET_STR_BUF_SIZE];
    JSAtom name = JS_ATOM_NULL, field = JS_ATOM_NULL;
    int op, idx = -1, var = -1, arg = -1;
    size_t n;

    if (q < 0 || q >= b->byte_code_len || level > 4 || size < 2)
        return false;
    op = bc[q];
    switch (op) {
    /* a variable read, or assigned and kept on the stack (x = ...; x()) */
    case OP_get_loc: case OP_get_loc_check: case OP_set_loc:
        var = get_u16(bc + q + 1);
        break;
    case OP_get_loc8: case OP_set_loc8: var = bc[q + 1]; break;
    case OP_get_loc0: case OP_get_loc1: case OP_get_loc2: case OP_get_loc3:
        var = op - OP_get_loc0; break;
    case OP_set_loc0: case OP_set_loc1: case OP_set_loc2: case OP_set_loc3:
        var = op - OP_set_loc0; break;
    case OP_get_arg: case OP_set_arg: arg = get_u16(bc + q + 1); break;
    case OP_get_arg0: case OP_get_arg1: case OP_get_arg2: case OP_get_arg3:
        arg = op - OP_get_arg0; break;
    case OP_get_var_ref: case OP_get_var_ref_check: case OP_set_var_ref:
        idx = get_u16(bc + q + 1);
        goto var_ref;
    case OP_get_var_ref0: case OP_get_var_ref1: case OP_get_var_ref2: case OP_get_var_ref3:
        idx = op - OP_get_var_ref0;
        goto var_ref;
    case OP_set_var_ref0: case OP_set_var_ref1: case OP_set_var_ref2: case OP_set_var_ref3:
        idx = op - OP_set_var_ref0;
    var_ref:
        if (idx >= b->closure_var_count || !b->closure_var)
            return false;
        name = b->closure_var[idx].var_name;
        break;
    case OP_get_var: case OP_get_var_undef:
        name = get_u32(bc + q + 1);
        break;
    case OP_push_this:
        snprintf(buf, size, "this");
        return true;
    case OP_get_field: case OP_get_field2:
        field = get_u32(bc + q + 1);
        if (!wb_name_pushed(ctx, b, src, src[q] - 1, buf, size, level + 1))
            return false;
        break;
    case OP_get_loc_field:
        field = get_u32(bc + q + 1);
        var = bc[q + 5];
        break;
    case OP_get_arg_field:
        field = get_u32(bc + q + 1);
        arg = bc[q + 5];
        break;
    case OP_push_this_field:
        field = get_u32(bc + q + 1);
        snprintf(buf, size, "this");
        break;
    case OP_call: case OP_call0: case OP_call1: case OP_call2: case OP_call3:
    case OP_call_method:
        if (!wb_name_pushed(ctx, b, src, src[q] - 1, buf, size, level + 1))
            return false;
        n = strlen(buf);
        if (n + 6 > size)
            return false;
        memcpy(buf + n, "(...)", 6);
        return true;
    default:
        return false;
    }
    if (var >= 0 || arg >= 0) {
        idx = var >= 0 ? b->arg_count + var : arg;
        if (!b->vardefs || idx >= b->arg_count + b->var_count)
            return false;
        name = b->vardefs[idx].var_name;
    }
    if (name != JS_ATOM_NULL) {
        if (name == JS_ATOM_this)
            snprintf(buf, size, "this");
        else
            snprintf(buf, size, "%s", JS_AtomGetStr(ctx, atom_buf, sizeof(atom_buf), name));
    } else if (field == JS_ATOM_NULL || !buf[0]) {
        return false;
    }
    if (field != JS_ATOM_NULL) {
        n = strlen(buf);
        JS_AtomGetStr(ctx, atom_buf, sizeof(atom_buf), field);
        if (n + 1 + strlen(atom_buf) + 1 > size)
            return false;
        buf[n] = '.';
        strcpy(buf + n + 1, atom_buf);
    }
    return true;
}

static bool wb_callee_name(JSContext *ctx, JSValueConst value, bool ctor,
                           char *buf, size_t size)
{
    JSStackFrame *sf = ctx->rt->current_stack_frame;
    JSFunctionBytecode *b;
    JSObject *fp;
    const JSOpCode *oi;
    const uint8_t *bc;
    int len, end, pos, next, op, n_pop, depth, i, target, argc, callee;
    int *slot, *src, *at;
    bool live, found = false;

    buf[0] = '\0';
    if (!sf || JS_VALUE_GET_TAG(sf->cur_func) != JS_TAG_OBJECT)
        return false;
    fp = JS_VALUE_GET_OBJ(sf->cur_func);
    if (!js_class_has_bytecode(fp->class_id) || !sf->cur_pc)
        return false;
    b = fp->u.func.function_bytecode;
    bc = b->byte_code_buf;
    len = b->byte_code_len;
    if (sf->cur_pc <= bc || sf->cur_pc > bc + len)
        return false;
    end = sf->cur_pc - bc;
    /* slot: the op (its position + 1) that pushed each stack slot; src: for
       a property read or a call, the op that pushed its object or callee
       (+ 1); at: the depth + 1 a jump left at its target */
    slot = js_mallocz_rt(ctx->rt, sizeof(int) * (b->stack_size + 2 + 2 * len));
    if (!slot)
        return false;
    src = slot + b->stack_size + 2;
    at = src + len;
    depth = 0;
    live = true;
    for (pos = 0; pos < end; pos = next) {
        op = bc[pos];
        if (op == 0 || op >= OP_COUNT)
            goto done;
        oi = &short_opcode_info(op);
        next = pos + oi->size;
        if (next > len)
            goto done;
        if (at[pos]) {
            /* a join: which op pushed a slot may depend on the path */
            depth = at[pos] - 1;
            memset(slot, 0, sizeof(int) * (b->stack_size + 2));
        } else if (!live) {
            goto done;
        }
        live = true;
        n_pop = oi->n_pop;
        if (oi->fmt == OP_FMT_npop || oi->fmt == OP_FMT_npop_u16)
            n_pop += get_u16(bc + pos + 1);
        else if (oi->fmt == OP_FMT_npopx)
            n_pop += op - OP_call0;
        if (depth < n_pop || depth - n_pop + oi->n_push > b->stack_size)
            goto done;
        if (next == end) {
            switch (ctor ? OP_invalid : op) {
            case OP_call0: case OP_call1: case OP_call2: case OP_call3:
                argc = op - OP_call0;
                callee = depth - argc - 1;
                break;
            case OP_call: case OP_tail_call: case OP_call_method: case OP_tail_call_method:
                argc = get_u16(bc + pos + 1);
                callee = depth - argc - 1;
                break;
            default:
                if (op != OP_call_constructor || !ctor)
                    goto done;
                argc = get_u16(bc + pos + 1);
                callee = depth - argc - 2;
                break;
            }
            /* the slot holds what failed to be called (the frame's
               position may be an earlier call's when the failing call
               came from elsewhere in the op) */
            if (callee >= 0 &&
                js_same_value(ctx, sf->var_buf[b->var_count + callee], value))
                found = wb_name_pushed(ctx, b, src, slot[callee] - 1, buf, size, 0);
            goto done;
        }
        switch (op) {
        case OP_dup:
            slot[depth] = slot[depth - 1];
            depth++;
            break;
        case OP_swap:
            i = slot[depth - 1];
            slot[depth - 1] = slot[depth - 2];
            slot[depth - 2] = i;
            break;
        case OP_get_field2:
            src[pos] = slot[depth - 1];
            slot[depth++] = pos + 1;
            break;
        case OP_get_field:
        case OP_get_length:
            src[pos] = slot[depth - 1];
            slot[depth - 1] = pos + 1;
            break;
        case OP_call0: case OP_call1: case OP_call2: case OP_call3:
        case OP_call: case OP_call_method:
            src[pos] = slot[depth - n_pop + (op == OP_call_method)];
            /* fall through */
        default:
            depth -= n_pop;
            for (i = 0; i < oi->n_push; i++)
                slot[depth++] = pos + 1;
            break;
        }
        target = -1;
        switch (op) {
        case OP_goto: target = pos + 1 + (int32_t)get_u32(bc + pos + 1); live = false; break;
        case OP_goto16: target = pos + 1 + (int16_t)get_u16(bc + pos + 1); live = false; break;
        case OP_goto8: target = pos + 1 + (int8_t)bc[pos + 1]; live = false; break;
        case OP_if_true8: case OP_if_false8: target = pos + 1 + (int8_t)bc[pos + 1]; break;
        case OP_if_true: case OP_if_false: case OP_catch:
            target = pos + 1 + (int32_t)get_u32(bc + pos + 1);
            break;
        case OP_gosub:
            target = pos + 1 + (int32_t)get_u32(bc + pos + 1);
            depth++;
            break;
        case OP_with_get_var: case OP_with_delete_var:
            target = pos + 5 + (int32_t)get_u32(bc + pos + 5);
            depth++;
            break;
        case OP_with_make_ref: case OP_with_get_ref: case OP_with_get_ref_undef:
            target = pos + 5 + (int32_t)get_u32(bc + pos + 5);
            depth += 2;
            break;
        case OP_with_put_var:
            target = pos + 5 + (int32_t)get_u32(bc + pos + 5);
            depth--;
            break;
        case OP_tail_call: case OP_tail_call_method: case OP_return: case OP_return_undef:
        case OP_return_async: case OP_throw: case OP_throw_error: case OP_ret:
            live = false;
            break;
        default:
            break;
        }
        if (target >= 0) {
            if (target >= len || depth < 0 || depth > b->stack_size)
                goto done;
            if (target > pos)
                at[target] = depth + 1;
            /* the adjustments above were for the target only */
            if (op == OP_gosub || op == OP_with_get_var || op == OP_with_delete_var)
                depth--;
            else if (op == OP_with_make_ref || op == OP_with_get_ref ||
                     op == OP_with_get_ref_undef)
                depth -= 2;
            else if (op == OP_with_put_var)
                depth++;
        }
    }
 done:
    js_free_rt(ctx->rt, slot);
    if (!found)
        buf[0] = '\0';
    return found;
}

/* a call op's callee is not callable: "x is not a function" when it can be
   named */
static JSValue wb_throw_not_a_function(JSContext *ctx, JSValueConst func_obj)
{
    char callee[WB_CALLEE_NAME_MAX];
    if (wb_callee_name(ctx, func_obj, false, callee, sizeof(callee)))
        return JS_ThrowTypeError(ctx, "%s is not a function", callee);
    return JS_ThrowTypeError(ctx, "not a function");
}

static void json_free_token(JSParseState *s, JSToken *token) {"#;

/// Definite initialisation of `let`/`const` locals, `this` read directly (both decided by
/// `resolve_labels` before its peepholes; see the comments at their heads), and the emitting
/// of the fused property reads.
const DEFINITE_INIT: &str = r#"/* wasbox: definite initialisation of the first 64 locals. One walk of the
   phase-2 bytecode in order, joining at each label what every jump to it
   carried (repeated until no label's state changes), finds where a local has
   been initialised on every path; a TDZ check there cannot throw, and becomes
   the unchecked op of the same size (which the peepholes of resolve_labels
   then combine: inc_loc, put_loc for dup/put/drop). Only
   set_loc_uninitialized makes a local uninitialised, so an exception handler
   and the code after a finally block (gosub) start from what held at the
   try's start or at the gosub, less every local the function ever
   uninitialises. Returns whether a label's state changed; -1 for bytecode it
   does not understand. */
static int wb_definite_init_walk(JSFunctionDef *s, uint64_t *at, uint8_t *seen,
                                 uint64_t ever_uninit, bool rewrite)
{
    uint8_t *bc = s->byte_code.buf;
    int len = s->byte_code.size, pos, op, idx, label, changed = 0;
    uint64_t cur = 0, bit;
    bool live = true;

#define WB_MERGE(l, v) do {                                         \
        uint64_t v_ = (v);                                          \
        if (!seen[l]) {                                             \
            seen[l] = 1; at[l] = v_; changed = 1;                   \
        } else if ((at[l] & v_) != at[l]) {                         \
            at[l] &= v_; changed = 1;                               \
        }                                                           \
    } while (0)

    for (pos = 0; pos < len; pos += opcode_info[op].size) {
        op = bc[pos];
        if (op == OP_label) {
            label = get_u32(bc + pos + 1);
            if (label < 0 || label >= s->label_count)
                return -1;
            if (seen[label]) {
                cur = live ? cur & at[label] : at[label];
                live = true;
            }
            continue;
        }
        switch (opcode_info[op].fmt) {
        case OP_FMT_label:
        case OP_FMT_label8:
        case OP_FMT_label16:
        case OP_FMT_label_u16:
        case OP_FMT_atom_label_u8:
        case OP_FMT_atom_label_u16:
            switch (op) {
            case OP_goto: case OP_if_true: case OP_if_false:
            case OP_catch: case OP_gosub:
                label = get_u32(bc + pos + 1);
                break;
            case OP_with_get_var: case OP_with_put_var:
            case OP_with_delete_var: case OP_with_make_ref:
            case OP_with_get_ref: case OP_with_get_ref_undef:
                label = get_u32(bc + pos + 5);
                break;
            default:
                return -1;
            }
            if (label < 0 || label >= s->label_count)
                return -1;
            break;
        default:
            label = -1;
            break;
        }
        if (!live)
            continue;
        switch (op) {
        case OP_set_loc_uninitialized:
        case OP_get_loc_check:
        case OP_put_loc_check:
        case OP_put_loc_check_init:
        case OP_put_loc:
        case OP_set_loc:
            idx = get_u16(bc + pos + 1);
            if (idx >= 64)
                break;
            bit = (uint64_t)1 << idx;
            if (op == OP_set_loc_uninitialized) {
                cur &= ~bit;
                break;
            }
            if (rewrite && (cur & bit)) {
                if (op == OP_get_loc_check)
                    bc[pos] = OP_get_loc;
                else if (op == OP_put_loc_check)
                    bc[pos] = OP_put_loc;
            }
            cur |= bit;
            break;
        case OP_goto:
            WB_MERGE(label, cur);
            live = false;
            break;
        case OP_catch:
            WB_MERGE(label, cur & ~ever_uninit);
            break;
        case OP_gosub:
            WB_MERGE(label, cur);
            cur &= ~ever_uninit;
            break;
        case OP_return:
        case OP_return_undef:
        case OP_return_async:
        case OP_throw:
        case OP_throw_error:
        case OP_ret:
            live = false;
            break;
        default:
            if (label >= 0)
                WB_MERGE(label, cur);
            break;
        }
    }
#undef WB_MERGE
    return pos == len ? changed : -1;
}

static uint64_t wb_definite_init(JSContext *ctx, JSFunctionDef *s)
{
    const uint8_t *bc = s->byte_code.buf;
    int len = s->byte_code.size, pos, op, idx, round, r;
    uint64_t ever_uninit = 0, *at;
    uint8_t *seen;
    bool any_check = false;

    for (pos = 0; pos < len; pos += opcode_info[op].size) {
        op = bc[pos];
        if (op == OP_get_loc_check || op == OP_put_loc_check) {
            any_check = true;
        } else if (op == OP_set_loc_uninitialized) {
            idx = get_u16(bc + pos + 1);
            if (idx < 64)
                ever_uninit |= (uint64_t)1 << idx;
        }
    }
    if (!any_check)
        return 0;
    at = js_malloc_rt(ctx->rt, (sizeof(*at) + 1) * (s->label_count + 1));
    if (!at)
        return 0;
    seen = (uint8_t *)(at + s->label_count + 1);
    memset(seen, 0, s->label_count + 1);
    for (round = 0; round < 64; round++) {
        r = wb_definite_init_walk(s, at, seen, ever_uninit, false);
        if (r < 0)
            break;
        if (r == 0) {
            wb_definite_init_walk(s, at, seen, ever_uninit, true);
            break;
        }
    }
    js_free_rt(ctx->rt, at);
    /* a local that no check reads any more, no closure sees and no eval
       can name need not be made uninitialised at all */
    if (s->has_eval_call)
        return 0;
    for (pos = 0; pos < len; pos += opcode_info[op].size) {
        op = bc[pos];
        if (op == OP_get_loc_check || op == OP_put_loc_check ||
            op == OP_put_loc_check_init) {
            idx = get_u16(bc + pos + 1);
            if (idx < 64)
                ever_uninit &= ~((uint64_t)1 << idx);
        }
    }
    for (idx = 0; idx < 64 && idx < s->var_count; idx++) {
        if (s->vars[idx].is_captured)
            ever_uninit &= ~((uint64_t)1 << idx);
    }
    return ever_uninit;
}

/* wasbox: in a strict function (not a derived class's constructor, not a
   generator or an async function) 'this' is this_obj as the caller passed it,
   never converted: when nothing captures the 'this' variable and the function
   only reads it, each read becomes push_this (or push_this_field for this.x)
   and the variable is never set. Returns its index, or -1. */
static int wb_this_direct(JSFunctionDef *s)
{
    const uint8_t *bc = s->byte_code.buf;
    int idx = s->this_var_idx, len = s->byte_code.size, pos, op;

    if (idx < 0 || !s->is_strict_mode || s->is_derived_class_constructor ||
        s->func_kind != JS_FUNC_NORMAL || s->has_eval_call ||
        s->vars[idx].is_captured)
        return -1;
    /* (a reference to it, make_loc_ref, captures it: refused above) */
    for (pos = 0; pos < len; pos += opcode_info[op].size) {
        op = bc[pos];
        if (opcode_info[op].fmt == OP_FMT_loc && op != OP_get_loc &&
            get_u16(bc + pos + 1) == idx)
            return -1;
    }
    return idx;
}

/* wasbox: get_loc(n), get_arg(n) or a direct 'this' followed by
   get_field(x) (not 'length', which get_length reads) as one op: emits op, x
   and, but for push_this_field, n; then the index where x was last found in
   the object's properties (a guess the interpreter checks and updates).
   Returns false, having emitted nothing, when no such get_field follows. */
static bool wb_fuse_field(JSFunctionDef *s, CodeContext *cc, DynBuf *bc_out,
                          int pos_next, int op, int idx,
                          int *line_num, int *col_num)
{
    if (!code_match(cc, pos_next, OP_get_field, -1) ||
        cc->atom == JS_ATOM_length)
        return false;
    if (cc->line_num >= 0) *line_num = cc->line_num;
    if (cc->col_num >= 0) *col_num = cc->col_num;
    add_pc2line_info(s, bc_out->size, *line_num, *col_num);
    dbuf_putc(bc_out, op);
    dbuf_put_u32(bc_out, cc->atom);
    if (op != OP_push_this_field)
        dbuf_putc(bc_out, idx);
    dbuf_putc(bc_out, 0);
    return true;
}

static __exception int resolve_labels(JSContext *ctx, JSFunctionDef *s)
{"#;

const EDITS: &[Edit] = &[
    Edit {
        file: "build.rs",
        why: "the C is compiled again when it changes (the crate's build script otherwise \
              runs once)",
        old: "    println!(\"cargo:rerun-if-env-changed=CARGO_CFG_SANITIZE\");\n",
        new: "    println!(\"cargo:rerun-if-env-changed=CARGO_CFG_SANITIZE\");\n    \
              println!(\"cargo:rerun-if-changed=quickjs/quickjs.c\");\n",
    },
    Edit {
        file: C,
        why: "room in the runtime for the shapes kept for reuse",
        old: "    JSShape **shape_hash;\n    void *user_opaque;",
        new: "    JSShape **shape_hash;\n    \
              /* wasbox: hashed shapes no object uses any more, each holding one\n       \
              reference, so that objects made and dropped in a loop find their\n       \
              shapes again instead of building them anew (a ring: the oldest is\n       \
              released first). */\n    \
              JSShape *shape_keep[JS_SHAPE_KEEP];\n    \
              uint32_t shape_keep_next;\n    \
              /* wasbox: changes when a prototype gains a property or any object's\n       \
              prototype changes (see JSShape.next_protos_epoch) */\n    \
              uint64_t proto_epoch;\n    \
              void *user_opaque;",
    },
    Edit {
        file: C,
        why: "the size of the ring, and of the shapes that are copied rather than changed",
        old: "struct JSRuntime {",
        new: "/* wasbox: shapes kept for reuse; shapes of fewer properties than\n   \
              JS_SHAPE_KEEP_PROPS are copied when a property is added, so that each\n   \
              step of an object's making stays findable. */\n\
              #define JS_SHAPE_KEEP 64\n\
              #define JS_SHAPE_KEEP_PROPS 16\n\n\
              struct JSRuntime {",
    },
    Edit {
        file: C,
        why: "forward declaration",
        old: "static void js_free_shape(JSRuntime *rt, JSShape *sh);\n",
        new: "static void js_free_shape(JSRuntime *rt, JSShape *sh);\n\
              static void js_release_kept_shapes(JSRuntime *rt);\n",
    },
    Edit {
        file: C,
        why: "a hashed shape no object uses is kept in the ring (never while cycles are freed: \
              its prototype may be among them; nor while the runtime ends)",
        old: "static void js_free_shape(JSRuntime *rt, JSShape *sh)\n\
              {\n    \
              if (unlikely(--JS_REF_COUNT(sh) <= 0)) {\n        \
              js_free_shape0(rt, sh);\n    \
              }\n\
              }",
        new: "static void js_free_shape(JSRuntime *rt, JSShape *sh)\n\
              {\n    \
              if (unlikely(--JS_REF_COUNT(sh) <= 0)) {\n        \
              if (sh->is_hashed && !rt->in_free &&\n            \
              rt->gc_phase != JS_GC_PHASE_REMOVE_CYCLES) {\n            \
              uint32_t i = rt->shape_keep_next;\n            \
              JSShape *old = rt->shape_keep[i];\n            \
              JS_REF_COUNT(sh) = 1;\n            \
              rt->shape_keep[i] = sh;\n            \
              rt->shape_keep_next = (i + 1) % JS_SHAPE_KEEP;\n            \
              if (old && --JS_REF_COUNT(old) <= 0)\n                \
              js_free_shape0(rt, old);\n            \
              return;\n        \
              }\n        \
              js_free_shape0(rt, sh);\n    \
              }\n\
              }\n\n\
              /* wasbox: releases the kept shapes (and the prototypes they hold). */\n\
              static void js_release_kept_shapes(JSRuntime *rt)\n\
              {\n    \
              uint32_t i;\n    \
              for (i = 0; i < JS_SHAPE_KEEP; i++) {\n        \
              JSShape *sh = rt->shape_keep[i];\n        \
              if (sh) {\n            \
              rt->shape_keep[i] = NULL;\n            \
              if (--JS_REF_COUNT(sh) <= 0)\n                \
              js_free_shape0(rt, sh);\n        \
              }\n    \
              }\n\
              }",
    },
    Edit {
        file: C,
        why: "the kept shapes are released before the runtime's last collection",
        old: "    rt->in_free = true;\n    JS_FreeValueRT(rt, rt->current_exception);",
        new: "    rt->in_free = true;\n    \
              js_release_kept_shapes(rt);\n    \
              JS_FreeValueRT(rt, rt->current_exception);",
    },
    Edit {
        file: C,
        why: "and when a context ends (they may hold its prototypes)",
        old: "    if (--JS_REF_COUNT(ctx) > 0)\n        return;\n    \
              assert(JS_REF_COUNT(ctx) == 0);\n",
        new: "    if (--JS_REF_COUNT(ctx) > 0)\n        return;\n    \
              assert(JS_REF_COUNT(ctx) == 0);\n    \
              js_release_kept_shapes(rt);\n",
    },
    Edit {
        file: C,
        why: "and at every collection, so that what they hold (a prototype, its methods, what \
              those close over) is garbage like the rest once nothing else uses it",
        old: "void JS_RunGC(JSRuntime *rt)\n{\n",
        new: "void JS_RunGC(JSRuntime *rt)\n{\n    \
              /* wasbox: the kept shapes first: what they hold is collected too */\n    \
              js_release_kept_shapes(rt);\n",
    },
    Edit {
        file: C,
        why: "a new object has room for four properties (two before): most objects made in \
              a loop have three or four, and each growth of the array is a reallocation",
        old: "#define JS_PROP_INITIAL_SIZE 2\n",
        new: "/* wasbox: four (was 2), see runtime/build/quickjs.rs */\n\
              #define JS_PROP_INITIAL_SIZE 4\n",
    },
    Edit {
        file: C,
        why: "a small hashed shape is copied when a property is added, not changed in place, \
              so that the shapes of each step stay to be found",
        old: "        } else if (JS_REF_COUNT(sh) != 1) {\n            \
              /* if the shape is shared, clone it */",
        new: "        } else if (JS_REF_COUNT(sh) != 1 || sh->prop_count < JS_SHAPE_KEEP_PROPS) {\n            \
              /* if the shape is shared, clone it (wasbox: a small one too, see\n               \
              JS_SHAPE_KEEP_PROPS) */",
    },
    Edit {
        file: C,
        why: "an object literal's field on an ordinary extensible object is added directly \
              (what JS_DefinePropertyValue comes to for such an object)",
        old: "                atom = get_u32(pc);\n                \
              pc += 4;\n\n                \
              ret = JS_DefinePropertyValue(ctx, sp[-2], atom, sp[-1],\n                                             \
              JS_PROP_C_W_E | JS_PROP_THROW);",
        new: "                atom = get_u32(pc);\n                \
              pc += 4;\n\n                \
              /* wasbox: a new data property of an ordinary extensible object */\n                \
              if (likely(JS_VALUE_GET_TAG(sp[-2]) == JS_TAG_OBJECT)) {\n                    \
              JSObject *p = JS_VALUE_GET_OBJ(sp[-2]);\n                    \
              JSProperty *pr;\n                    \
              if (!p->is_exotic && p->extensible &&\n                        \
              (js_shape_next_is(p->shape, atom) ||\n                         \
              !find_own_property(&pr, p, atom))) {\n                        \
              pr = add_property_c_w_e(ctx, p, atom);\n                        \
              if (unlikely(!pr))\n                            \
              goto exception;\n                        \
              pr->u.value = sp[-1];\n                        \
              sp--;\n                        \
              BREAK;\n                    \
              }\n                \
              }\n                \
              ret = JS_DefinePropertyValue(ctx, sp[-2], atom, sp[-1],\n                                             \
              JS_PROP_C_W_E | JS_PROP_THROW);",
    },
    Edit {
        file: C,
        why: "an assignment that adds a property to an ordinary extensible object whose \
              prototypes are ordinary and lack it (`this.x = x`) adds it directly",
        old: "                    prs = find_own_property(&pr, p, atom);\n                    \
              if (!prs)\n                        \
              goto put_field_slow_path;\n",
        new: r#"                    /* wasbox: the shape's last transition may tell that the
                       object lacks the property, and that its prototypes do */
                    prs = js_shape_next_is(p->shape, atom) ? NULL :
                        find_own_property(&pr, p, atom);
                    if (!prs) {
                        /* wasbox: a new property, no prototype has it */
                        JSObject *p1;
                        JSShape *sh1 = p->shape;
                        if (p->is_exotic || !p->extensible)
                            goto put_field_slow_path;
                        if (!js_shape_next_is(sh1, atom) ||
                            sh1->next_protos_epoch != ctx->rt->proto_epoch) {
                            for (p1 = sh1->proto; p1; p1 = p1->shape->proto) {
                                if (p1->is_exotic || find_own_property(&pr, p1, atom))
                                    goto put_field_slow_path;
                            }
                            if (js_shape_next_is(sh1, atom))
                                sh1->next_protos_epoch = ctx->rt->proto_epoch;
                        }
                        pr = add_property_c_w_e(ctx, p, atom);
                        if (unlikely(!pr))
                            goto exception;
                        pr->u.value = sp[-1];
                        JS_FreeValue(ctx, obj);
                        sp -= 2;
                        BREAK;
                    }
"#,
    },
    Edit {
        file: C,
        why: "a shape remembers the shape it became when a property was last added to it \
              (a transition: `{}` -> `{id}` -> `{id, x}` found without hashing and comparing \
              every property again)",
        old: "    JSShape *shape_hash_next; /* in JSRuntime.shape_hash[h] list */\n    \
              JSObject *proto;\n",
        new: r#"    JSShape *shape_hash_next; /* in JSRuntime.shape_hash[h] list */
    JSObject *proto;
    /* wasbox: while both are in the shape hash table, the shape this one
       became when next_atom was last added with next_flags (see
       add_property), and the shape whose next_sh this one is. Neither holds
       a reference: each forgets the other when it leaves the table, which
       it does before it changes or is freed. */
    JSShape *next_sh;
    JSShape *prev_sh;
    JSAtom next_atom;
    int next_flags;
    /* wasbox: when equal to JSRuntime.proto_epoch, no prototype of this
       shape's chain has next_atom and none is exotic (see OP_put_field) */
    uint64_t next_protos_epoch;
"#,
    },
    Edit {
        file: C,
        why: "a shape leaving the hash table (to change, or to be freed) drops its transitions",
        old: "static void js_shape_hash_unlink(JSRuntime *rt, JSShape *sh)\n{\n    \
              uint32_t h;\n    JSShape **psh;\n",
        new: r#"/* wasbox: true when the shape's last transition adds 'atom' as an ordinary
   data property: an object of this shape lacks 'atom' */
static inline bool js_shape_next_is(JSShape *sh, JSAtom atom)
{
    return sh->next_sh && sh->next_atom == atom &&
        sh->next_flags == JS_PROP_C_W_E;
}

static void js_shape_hash_unlink(JSRuntime *rt, JSShape *sh)
{
    uint32_t h;
    JSShape **psh;

    /* wasbox: see JSShape.next_sh */
    if (sh->next_sh) {
        sh->next_sh->prev_sh = NULL;
        sh->next_sh = NULL;
    }
    if (sh->prev_sh) {
        sh->prev_sh->next_sh = NULL;
        sh->prev_sh = NULL;
    }
"#,
    },
    Edit {
        file: C,
        why: "a new shape has no transitions",
        old: "    sh->deleted_prop_count = 0;\n    sh->is_hashed = false;\n    return sh;\n}",
        new: "    sh->deleted_prop_count = 0;\n    sh->is_hashed = false;\n    \
              sh->next_sh = NULL;\n    sh->prev_sh = NULL;\n    return sh;\n}",
    },
    Edit {
        file: C,
        why: "nor has a copy",
        old: "    add_gc_object(ctx->rt, &sh->header, JS_GC_OBJ_TYPE_SHAPE);\n    \
              sh->is_hashed = false;\n    if (sh->proto) {",
        new: "    add_gc_object(ctx->rt, &sh->header, JS_GC_OBJ_TYPE_SHAPE);\n    \
              sh->is_hashed = false;\n    sh->next_sh = NULL;\n    sh->prev_sh = NULL;\n    \
              if (sh->proto) {",
    },
    Edit {
        file: C,
        why: "adding a property follows the shape's last transition when it is for the same \
              property and flags, and records the one it finds otherwise",
        old: "        /* try to find an existing shape */\n        \
              new_sh = find_hashed_shape_prop(ctx->rt, sh, prop, prop_flags);\n        \
              if (new_sh) {",
        new: r#"        /* try to find an existing shape (wasbox: the last transition
           first, see JSShape.next_sh) */
        new_sh = sh->next_sh;
        if (!new_sh || sh->next_atom != prop || sh->next_flags != prop_flags) {
            new_sh = find_hashed_shape_prop(ctx->rt, sh, prop, prop_flags);
            if (new_sh) {
                if (sh->next_sh)
                    sh->next_sh->prev_sh = NULL;
                if (new_sh->prev_sh)
                    new_sh->prev_sh->next_sh = NULL;
                sh->next_sh = new_sh;
                new_sh->prev_sh = sh;
                sh->next_atom = prop;
                sh->next_flags = prop_flags;
                sh->next_protos_epoch = 0;
            }
        }
        if (new_sh) {"#,
    },
    Edit {
        file: C,
        why: "the prototype epoch starts at 1 (a shape's 0 is never current)",
        old: "    rt->shape_hash_bits = 6;   /* 64 shapes */",
        new: "    rt->proto_epoch = 1;\n    rt->shape_hash_bits = 6;   /* 64 shapes */",
    },
    Edit {
        file: C,
        why: "every object that is a shape's prototype is marked as one, so that what it \
              gains is seen",
        old: "    if (proto)\n        js_dup(JS_MKPTR(JS_TAG_OBJECT, proto));\n    \
              sh->proto = proto;\n    /* prop_hash_mask",
        new: r#"    if (proto) {
        js_dup(JS_MKPTR(JS_TAG_OBJECT, proto));
        /* wasbox: see JSShape.next_protos_epoch */
        proto->is_prototype = true;
    }
    sh->proto = proto;
    /* prop_hash_mask"#,
    },
    Edit {
        file: C,
        why: "a prototype that gains a property makes every remembered prototype walk stale",
        old: "    if (unlikely(p->is_prototype)) {\n        \
              /* track addition of small integer properties to",
        new: "    if (unlikely(p->is_prototype)) {\n        \
              /* wasbox: see JSShape.next_protos_epoch */\n        \
              ctx->rt->proto_epoch++;\n        \
              /* track addition of small integer properties to",
    },
    Edit {
        file: C,
        why: "and so does any change of an object's prototype",
        old: "    sh->proto = proto;\n    if (proto)\n        proto->is_prototype = true;\n",
        new: "    sh->proto = proto;\n    if (proto)\n        proto->is_prototype = true;\n    \
              /* wasbox: see JSShape.next_protos_epoch */\n    \
              ctx->rt->proto_epoch++;\n",
    },
    Edit {
        file: C,
        why: "a new object and its property array are one allocation, not two (and one free)",
        old: "    js_trigger_gc(ctx->rt, sizeof(JSObject));\n    \
              p = js_malloc(ctx, sizeof(JSObject));\n",
        new: "    js_trigger_gc(ctx->rt, sizeof(JSObject));\n    \
              /* wasbox: the object and its first property array in one block (see\n       \
              js_props_inline) */\n    \
              p = js_malloc(ctx, sizeof(JSObject) + sizeof(JSProperty) * sh->prop_size);\n",
    },
    Edit {
        file: C,
        why: "the property array is the rest of the object's block",
        old: "    p->prop = js_malloc(ctx, sizeof(JSProperty) * sh->prop_size);\n    \
              if (unlikely(!p->prop)) {\n        \
              js_free(ctx, p);\n    \
              fail:",
        new: "    p->prop = (JSProperty *)(p + 1);\n    \
              if (unlikely(false)) {\n    \
              fail:",
    },
    Edit {
        file: C,
        why: "resizing a property array that is still in the object's block allocates one \
              of its own",
        old: "/* make space to hold at least 'count' properties */",
        new: r#"/* wasbox: true while the object's properties are still in the block the
   object was allocated with (see JS_NewObjectFromShape) */
static inline bool js_props_inline(JSObject *p)
{
    return p->prop == (JSProperty *)(p + 1);
}

/* wasbox: the object's property array resized from 'old_count' entries to
   'new_count' (js_realloc for an array of its own block, which a shrinking
   array in the object's block never needs); NULL when out of memory, the
   array left as it was */
static JSProperty *js_props_realloc(JSContext *ctx, JSObject *p,
                                    uint32_t old_count, uint32_t new_count)
{
    JSProperty *new_prop;

    if (!js_props_inline(p))
        return js_realloc(ctx, p->prop, sizeof(JSProperty) * new_count);
    if (new_count <= old_count)
        return p->prop;
    new_prop = js_malloc(ctx, sizeof(JSProperty) * new_count);
    if (new_prop)
        memcpy(new_prop, p->prop, sizeof(JSProperty) * old_count);
    return new_prop;
}

/* make space to hold at least 'count' properties */"#,
    },
    Edit {
        file: C,
        why: "growing an object's properties",
        old: "        new_prop = js_realloc(ctx, p->prop, sizeof(new_prop[0]) * new_size);\n        \
              if (unlikely(!new_prop))\n            return -1;",
        new: "        new_prop = js_props_realloc(ctx, p, sh->prop_size, new_size);\n        \
              if (unlikely(!new_prop))\n            return -1;",
    },
    Edit {
        file: C,
        why: "compacting them (always a shrink)",
        old: "    /* reduce the size of the object properties */\n    \
              new_prop = js_realloc(ctx, p->prop, sizeof(new_prop[0]) * new_size);",
        new: "    /* reduce the size of the object properties (wasbox: not when they are\n       \
              in the object's block) */\n    \
              new_prop = js_props_realloc(ctx, p, new_size, new_size);",
    },
    Edit {
        file: C,
        why: "moving an object to a shape of another size",
        old: "                new_prop = js_realloc(ctx, p->prop, sizeof(p->prop[0]) *\n                                      \
              new_sh->prop_size);",
        new: "                new_prop = js_props_realloc(ctx, p, sh->prop_size,\n                                            \
              new_sh->prop_size);",
    },
    Edit {
        file: C,
        why: "freeing an object frees its property array only when it has a block of its own",
        old: "    js_free_rt(rt, p->prop);\n    \
              /* as an optimization we destroy the shape immediately without",
        new: "    if (!js_props_inline(p))\n        js_free_rt(rt, p->prop);\n    \
              /* as an optimization we destroy the shape immediately without",
    },
    Edit {
        file: C,
        why: "`s.length` of a string is read directly (what JS_GetPropertyInternal answers)",
        old: "                } else {\n                \
              get_length_slow_path:\n                    sf->cur_pc = pc;",
        new: "                } else if (JS_VALUE_GET_TAG(obj) == JS_TAG_STRING) {\n                    \
              /* wasbox: a string's length, as JS_GetPropertyInternal */\n                    \
              val = js_int32(JS_VALUE_GET_STRING(obj)->len);\n                \
              } else {\n                \
              get_length_slow_path:\n                    sf->cur_pc = pc;",
    },
    Edit {
        file: C,
        why: "adding an ordinary data property along the shape's last transition is inline in \
              the interpreter's fast paths above (no call, no look-up)",
        old: "/* can be called on JS_CLASS_ARRAY, JS_CLASS_ARGUMENTS or\n   \
              JS_CLASS_MAPPED_ARGUMENTS objects. return < 0 if memory alloc\n   error. */",
        new: r#"/* wasbox: add_property(ctx, p, prop, JS_PROP_C_W_E) for an object that lacks
   'prop', inline when the shape's last transition is for it (see
   JSShape.next_sh) and keeps the size of the property array; always inline (a
   call in wasm costs a stack and an epoch check) */
static inline __attribute__((always_inline))
JSProperty *add_property_c_w_e(JSContext *ctx, JSObject *p, JSAtom prop)
{
    JSShape *sh = p->shape;
    JSShape *new_sh = sh->next_sh;

    if (likely(new_sh && !p->is_prototype && sh->next_atom == prop &&
               sh->next_flags == JS_PROP_C_W_E &&
               new_sh->prop_size == sh->prop_size)) {
        p->shape = js_dup_shape(new_sh);
        if (JS_REF_COUNT(sh) > 1)
            JS_REF_COUNT(sh)--;
        else
            js_free_shape(ctx->rt, sh);
        return &p->prop[new_sh->prop_count - 1];
    }
    return add_property(ctx, p, prop, JS_PROP_C_W_E);
}

/* can be called on JS_CLASS_ARRAY, JS_CLASS_ARGUMENTS or
   JS_CLASS_MAPPED_ARGUMENTS objects. return < 0 if memory alloc
   error. */"#,
    },
    Edit {
        file: C,
        why: "`new C()` reads an ordinary constructor's own `prototype` directly (what \
              JS_GetProperty answers), without taking and dropping a reference",
        old: "        proto = JS_GetProperty(ctx, ctor, JS_ATOM_prototype);\n        \
              if (JS_IsException(proto))\n            return proto;\n        \
              if (!JS_IsObject(proto)) {",
        new: r#"        /* wasbox: an ordinary constructor's own 'prototype' data property
           holding an object is read directly (what JS_GetProperty answers) */
        if (JS_VALUE_GET_TAG(ctor) == JS_TAG_OBJECT) {
            JSObject *p = JS_VALUE_GET_OBJ(ctor);
            JSProperty *pr;
            JSShapeProperty *prs;
            if (!p->is_exotic &&
                (prs = find_own_property(&pr, p, JS_ATOM_prototype)) &&
                !(prs->flags & JS_PROP_TMASK) &&
                JS_VALUE_GET_TAG(pr->u.value) == JS_TAG_OBJECT) {
                /* the constructor holds the prototype meanwhile */
                return JS_NewObjectProtoClass(ctx, pr->u.value, class_id);
            }
        }
        proto = JS_GetProperty(ctx, ctor, JS_ATOM_prototype);
        if (JS_IsException(proto))
            return proto;
        if (!JS_IsObject(proto)) {"#,
    },
    Edit {
        file: C,
        why: "freeing an object frees its plain values inline, not in a call each",
        old: "    for(i = 0; i < sh->prop_count; i++) {\n        \
              free_property(rt, &p->prop[i], pr->flags);\n        pr++;\n    }\n",
        new: "    for(i = 0; i < sh->prop_count; i++) {\n        \
              /* wasbox: a plain value is freed here, not in a call */\n        \
              if (likely(!(pr->flags & JS_PROP_TMASK)))\n            \
              JS_FreeValueRT(rt, p->prop[i].u.value);\n        \
              else\n            \
              free_property(rt, &p->prop[i], pr->flags);\n        pr++;\n    }\n",
    },
    Edit {
        file: C,
        why: "push_atom_value answers a string atom's value without a call",
        old: "        CASE(OP_push_atom_value):\n            \
              *sp++ = JS_AtomToValue(ctx, get_u32(pc));\n",
        new: r#"        CASE(OP_push_atom_value):
            {
                /* wasbox: a string atom is its own value (what
                   JS_AtomToValue answers), without a call */
                JSAtom atom = get_u32(pc);
                JSAtomStruct *ap;
                if (likely(!__JS_AtomIsTaggedInt(atom) &&
                           (ap = rt->atom_array[atom])->atom_type == JS_ATOM_TYPE_STRING))
                    *sp++ = js_dup(JS_MKPTR(JS_TAG_STRING, ap));
                else
                    *sp++ = JS_AtomToValue(ctx, atom);
            }
"#,
    },
    Edit {
        file: C,
        why: "room for where a constructor calls its class's field initialiser",
        old: "    int home_object_var_idx;\n",
        new: "    int home_object_var_idx;\n    \
              /* wasbox: where emit_class_field_init put its call, or -1 */\n    \
              int class_field_init_pos;\n",
    },
    Edit {
        file: C,
        why: "a new function has no field initialiser call yet",
        old: "    fd->home_object_var_idx = -1;\n",
        new: "    fd->home_object_var_idx = -1;\n    fd->class_field_init_pos = -1;\n",
    },
    Edit {
        file: C,
        why: "a constructor remembers where it calls the field initialiser",
        old: "    int label_next;\n\n    emit_op(s, OP_scope_get_var);\n    \
              emit_atom(s, JS_ATOM_class_fields_init);\n",
        new: "    int label_next;\n\n    \
              if (s->cur_func->class_field_init_pos < 0)\n        \
              s->cur_func->class_field_init_pos = s->cur_func->byte_code.size;\n    \
              emit_op(s, OP_scope_get_var);\n    \
              emit_atom(s, JS_ATOM_class_fields_init);\n",
    },
    Edit {
        file: C,
        why: "a base class without instance fields: its constructor's call of the (absent) \
              field initialiser is erased",
        old: "/* initialize the class fields, called by the constructor. Note:",
        new: r#"/* wasbox: erases the call emit_class_field_init put at the start of a base
   class constructor (the class turned out to have no instance fields, so
   <class_fields_init> is undefined): exactly the ops it emits, or nothing. */
static void wb_erase_class_field_init(JSContext *ctx, JSFunctionDef *fd)
{
    static const uint8_t ops[] = { OP_scope_get_var, OP_dup, OP_if_false,
        OP_scope_get_var, OP_swap, OP_call_method, OP_label, OP_drop };
    uint8_t *bc = fd->byte_code.buf;
    int start = fd->class_field_init_pos, pos = start, at[countof(ops)], i, label;

    if (start < 0)
        return;
    for (i = 0; i < countof(ops); i++) {
        if (pos >= fd->byte_code.size || bc[pos] != ops[i])
            return;
        at[i] = pos;
        pos += opcode_info[ops[i]].size;
    }
    /* the if_false jumps to the label op; the two atoms are the two names */
    label = get_u32(bc + at[2] + 1);
    if (label != get_u32(bc + at[6] + 1))
        return;
    JS_FreeAtom(ctx, get_u32(bc + at[0] + 1));
    JS_FreeAtom(ctx, get_u32(bc + at[3] + 1));
    fd->label_slots[label].ref_count--;
    memset(bc + start, OP_nop, pos - start);
    fd->class_field_init_pos = -1;
}

/* initialize the class fields, called by the constructor. Note:"#,
    },
    Edit {
        file: C,
        why: "the erasing, once the class is known to have no instance fields",
        old: "        if (cf->fields_init_fd) {\n            emit_class_init_end(s, cf);\n        \
              } else {\n            emit_op(s, OP_undefined);\n        }\n",
        new: "        if (cf->fields_init_fd) {\n            emit_class_init_end(s, cf);\n        \
              } else {\n            emit_op(s, OP_undefined);\n            \
              /* wasbox: no instance fields: the base constructor need not\n               \
              look for their initialiser */\n            \
              if (ctor_fd->func_type == JS_PARSE_FUNC_CLASS_CONSTRUCTOR)\n                \
              wb_erase_class_field_init(ctx, ctor_fd);\n        }\n",
    },
    Edit {
        file: C,
        why: "definite initialisation: TDZ checks that cannot throw become plain loads and stores",
        old: "static __exception int resolve_labels(JSContext *ctx, JSFunctionDef *s)\n{",
        new: DEFINITE_INIT,
    },
    Edit {
        file: C,
        why: "resolve_labels runs the definite initialisation first",
        old: "    JumpSlot *jp;\n\n    label_slots = s->label_slots;\n\n    \
              line_num = s->line_num;\n    col_num = s->col_num;\n\n    \
              cc.bc_buf = bc_buf = s->byte_code.buf;",
        new: "    JumpSlot *jp;\n    uint64_t dead_uninit;\n    int this_direct;\n\n    \
              label_slots = s->label_slots;\n\n    \
              line_num = s->line_num;\n    col_num = s->col_num;\n\n    \
              dead_uninit = wb_definite_init(ctx, s);\n    \
              this_direct = wb_this_direct(s);\n    \
              cc.bc_buf = bc_buf = s->byte_code.buf;",
    },
    Edit {
        file: C,
        why: "and drops what makes a local uninitialised when nothing could see it",
        old: "        case OP_swap:\n            // transformation: swap swap -> nothing!",
        new: "        case OP_set_loc_uninitialized:\n            \
              /* wasbox: see wb_definite_init */\n            \
              if (get_u16(bc_buf + pos + 1) < 64 &&\n                \
              (dead_uninit >> get_u16(bc_buf + pos + 1)) & 1)\n                break;\n            \
              goto no_change;\n\n        \
              case OP_swap:\n            // transformation: swap swap -> nothing!",
    },
    Edit {
        file: "quickjs/quickjs-opcode.h",
        why: "three ops of wasbox's: a local's, an argument's or this's property",
        old: "DEF( typeof_is_function, 1, 1, 1, none)\n",
        new: "DEF( typeof_is_function, 1, 1, 1, none)\n\n\
              /* wasbox: get_loc or get_arg (an index below 256) then get_field, in one op;\n   \
              the u16 is the index and, above it, where the property was last found */\n\
              DEF(  get_loc_field, 7, 0, 1, atom_u16)\n\
              DEF(  get_arg_field, 7, 0, 1, atom_u16)\n\
              /* wasbox: this.x where this is this_obj; the u8 as above */\n\
              DEF(push_this_field, 6, 0, 1, atom_u8)\n\
              /* wasbox: an object literal of n (u16) named properties: the object made\n   \
              with the shape of cpool[idx] (u16), its values the n on the stack */\n\
              DEF(   object_shape, 5, 0, 1, npop_u16)\n\
              /* wasbox: a binary op (u8) with an int16 constant (the u16) as its right operand \
              (the top byte is unused) */\n\
              DEF(        binop_k, 5, 1, 1, u32)\n",
    },
    Edit {
        file: "quickjs/quickjs-opcode.h",
        why: "the parser's form of object_shape (phase 1 emits no short opcodes)",
        old: "def( set_class_name, 5, 1, 1, u32) /* emitted in phase 1, removed in phase 2 */\n",
        new: "def( set_class_name, 5, 1, 1, u32) /* emitted in phase 1, removed in phase 2 */\n\
              def(object_template, 5, 0, 1, npop_u16) /* wasbox: emitted in phase 1, object_shape in phase 3 */\n",
    },
    Edit {
        file: C,
        why: "object literals of named properties made in one op (the helpers)",
        old: "static __exception int js_parse_object_literal(JSParseState *s)\n{",
        new: OBJECT_TEMPLATE,
    },
    Edit {
        file: C,
        why: "an object literal remembers where its object op is",
        old: "    bool has_proto;\n\n    if (next_token(s))\n        goto fail;\n    \
              /* XXX: add an initial length that will be patched back */\n    \
              emit_op(s, OP_object);\n",
        new: "    bool has_proto;\n    \
              /* wasbox: see wb_object_template */\n    \
              int wb_pos[WB_OBJECT_TEMPLATE_MAX], wb_n = 0, wb_object_pos;\n\n    \
              if (next_token(s))\n        goto fail;\n    \
              /* XXX: add an initial length that will be patched back */\n    \
              wb_object_pos = s->cur_func->byte_code.size;\n    \
              emit_op(s, OP_object);\n",
    },
    Edit {
        file: C,
        why: "a spread property keeps the literal as it is",
        old: "            emit_op(s, OP_drop); /* pop src object */\n            goto next;\n",
        new: "            emit_op(s, OP_drop); /* pop src object */\n            \
              wb_n = -1; /* wasbox: see wb_object_template */\n            goto next;\n",
    },
    Edit {
        file: C,
        why: "each property's define_field is recorded",
        old: "        JS_FreeAtom(s->ctx, name);\n    next:\n        name = JS_ATOM_NULL;\n",
        new: "        /* wasbox: see wb_object_template */\n        \
              wb_n = wb_object_field(s, wb_pos, wb_n);\n        \
              JS_FreeAtom(s->ctx, name);\n    next:\n        name = JS_ATOM_NULL;\n",
    },
    Edit {
        file: C,
        why: "and at the literal's end they become one op",
        old: "    if (js_parse_expect(s, '}'))\n        goto fail;\n    return 0;\n \
              fail:\n    JS_FreeAtom(s->ctx, name);\n    return -1;\n}\n\n\
              /* allow the 'in' binary operator */",
        new: "    if (js_parse_expect(s, '}'))\n        goto fail;\n    \
              /* wasbox: see wb_object_template */\n    \
              if (wb_object_template(s, wb_object_pos, wb_pos, wb_n))\n        goto fail;\n    \
              return 0;\n \
              fail:\n    JS_FreeAtom(s->ctx, name);\n    return -1;\n}\n\n\
              /* allow the 'in' binary operator */",
    },
    Edit {
        file: C,
        why: "phase 3 turns the parser's object_template into object_shape",
        old: "        case OP_object:\n            \
              if (code_match(&cc, pos_next, OP_null, OP_set_proto, -1)) {\n",
        new: "        case OP_object_template:\n            \
              /* wasbox: see wb_object_template */\n            \
              add_pc2line_info(s, bc_out.size, line_num, col_num);\n            \
              dbuf_putc(&bc_out, OP_object_shape);\n            \
              dbuf_put(&bc_out, bc_buf + pos + 1, 4);\n            \
              break;\n        \
              case OP_object:\n            \
              if (code_match(&cc, pos_next, OP_null, OP_set_proto, -1)) {\n",
    },
    Edit {
        file: C,
        why: "object_shape's work",
        old: "static JSValue JS_CallInternal(JSContext *caller_ctx, JSValueConst func_obj,\n",
        new: OBJECT_SHAPE_FN,
    },
    Edit {
        file: C,
        why: "the interpreter's object_shape",
        old: "        CASE(OP_special_object):\n",
        new: OBJECT_SHAPE_OP,
    },
    Edit {
        file: C,
        why: "spreading a string copies its characters, as ToObject would (`{...'hi'}`, \
              `const {...r} = 'hi'`)",
        old: "    if (JS_VALUE_GET_TAG(source) != JS_TAG_OBJECT)\n        return 0;\n\n    \
              if (JS_VALUE_GET_TAG(excluded) == JS_TAG_OBJECT)",
        new: "    if (JS_VALUE_GET_TAG(source) != JS_TAG_OBJECT) {\n        \
              /* wasbox: a string's characters are its own enumerable properties */\n        \
              if (JS_VALUE_GET_TAG(source) == JS_TAG_STRING ||\n            \
              JS_VALUE_GET_TAG(source) == JS_TAG_STRING_ROPE) {\n            \
              val = JS_ToObject(ctx, source);\n            \
              if (JS_IsException(val))\n                return -1;\n            \
              ret = JS_CopyDataProperties(ctx, target, val, excluded, setprop);\n            \
              JS_FreeValue(ctx, val);\n            \
              return ret;\n        }\n        \
              return 0;\n    }\n\n    \
              if (JS_VALUE_GET_TAG(excluded) == JS_TAG_OBJECT)",
    },
    Edit {
        file: C,
        why: "loops tested at the bottom (the helpers)",
        old: "/* allow the 'in' binary operator */\n#define PF_IN_ACCEPTED",
        new: LOOP_ROTATION,
    },
    Edit {
        file: C,
        why: "a while loop remembers where its test's code is",
        old: "            emit_label(s, label_cont);\n            \
              if (js_parse_expr_paren(s))\n                goto fail;\n            \
              emit_goto(s, OP_if_false, label_break);\n\n            \
              if (js_parse_statement(s))\n                goto fail;\n            \
              emit_goto(s, OP_goto, label_cont);\n",
        new: "            emit_label(s, label_cont);\n            \
              wb_test = s->cur_func->byte_code.size;\n            \
              if (js_parse_expr_paren(s))\n                goto fail;\n            \
              wb_test_end = s->cur_func->byte_code.size;\n            \
              emit_goto(s, OP_if_false, label_break);\n            \
              /* wasbox: see wb_loop_test_copyable */\n            \
              wb_body = -1;\n            \
              if (wb_loop_test_copyable(s, wb_test, wb_test_end)) {\n                \
              wb_body = new_label(s);\n                \
              emit_label(s, wb_body);\n            }\n\n            \
              if (js_parse_statement(s))\n                goto fail;\n            \
              if (!wb_loop_test_at_end(s, wb_body, wb_test, wb_test_end))\n                \
              emit_goto(s, OP_goto, label_cont);\n",
    },
    Edit {
        file: C,
        why: "(its variables)",
        old: "    case TOK_WHILE:\n        {\n            int label_cont, label_break;\n",
        new: "    case TOK_WHILE:\n        {\n            int label_cont, label_break;\n            \
              int wb_test, wb_test_end, wb_body;\n",
    },
    Edit {
        file: C,
        why: "a for loop remembers where its test's code is",
        old: "                emit_label(s, label_test);\n                \
              if (js_parse_expr(s))\n                    goto fail;\n                \
              emit_goto(s, OP_if_false, label_break);\n",
        new: "                emit_label(s, label_test);\n                \
              wb_test = s->cur_func->byte_code.size;\n                \
              if (js_parse_expr(s))\n                    goto fail;\n                \
              wb_test_end = s->cur_func->byte_code.size;\n                \
              emit_goto(s, OP_if_false, label_break);\n",
    },
    Edit {
        file: C,
        why: "(its variables)",
        old: "            int label_cont, label_break, label_body, label_test;\n            \
              int pos_cont, pos_body, block_scope_level;\n",
        new: "            int label_cont, label_break, label_body, label_test;\n            \
              int pos_cont, pos_body, block_scope_level;\n            \
              int wb_test = 0, wb_test_end = 0;\n",
    },
    Edit {
        file: C,
        why: "a for loop with an increment ends in its test, not a jump back to it",
        old: "                /* increment part ends with a goto */\n                \
              s->cur_func->last_opcode_pos = bc->size - 5;\n                \
              /* relocate labels */\n                \
              for (i = label_cont; i < s->cur_func->label_count; i++) {\n                    \
              LabelSlot *ls = &s->cur_func->label_slots[i];\n                    \
              if (ls->pos >= pos_cont && ls->pos < pos_body)\n                        \
              ls->pos += offset;\n                }\n",
        new: "                /* increment part ends with a goto */\n                \
              s->cur_func->last_opcode_pos = bc->size - 5;\n                \
              /* relocate labels */\n                \
              for (i = label_cont; i < s->cur_func->label_count; i++) {\n                    \
              LabelSlot *ls = &s->cur_func->label_slots[i];\n                    \
              if (ls->pos >= pos_cont && ls->pos < pos_body)\n                        \
              ls->pos += offset;\n                }\n                \
              /* wasbox: the goto to the test becomes the test */\n                \
              if (bc->buf[bc->size - 5] == OP_goto &&\n                    \
              get_u32(bc->buf + bc->size - 4) == label_test &&\n                    \
              wb_loop_test_copyable(s, wb_test, wb_test_end)) {\n                    \
              bc->size -= 5;\n                    \
              update_label(s->cur_func, label_test, -1);\n                    \
              s->cur_func->last_opcode_pos = -1;\n                    \
              if (!wb_loop_test_at_end(s, label_body, wb_test, wb_test_end))\n                        \
              emit_goto(s, OP_goto, label_test);\n                }\n",
    },
    Edit {
        file: C,
        why: "and so does one without",
        old: "            } else {\n                emit_goto(s, OP_goto, label_cont);\n            }\n\n            \
              emit_label(s, label_break);\n",
        new: "            } else if (label_test == label_body ||\n                       \
              !wb_loop_test_at_end(s, label_body, wb_test, wb_test_end)) {\n                \
              emit_goto(s, OP_goto, label_cont);\n            }\n\n            \
              emit_label(s, label_break);\n",
    },
    Edit {
        file: "quickjs/quickjs-opcode.h",
        why: "set_arg0..3 give their opcode numbers to wasbox's ops (a set_arg is rare: \
              set_arg with its index does it)",
        old: "DEF(       set_arg0, 1, 1, 1, none_arg)\n\
              DEF(       set_arg1, 1, 1, 1, none_arg)\n\
              DEF(       set_arg2, 1, 1, 1, none_arg)\n\
              DEF(       set_arg3, 1, 1, 1, none_arg)\n",
        new: "",
    },
    Edit {
        file: C,
        why: "(their interpreter cases)",
        old: "        CASE(OP_set_arg0): set_value(ctx, &arg_buf[0], js_dup(sp[-1])); BREAK;\n        \
              CASE(OP_set_arg1): set_value(ctx, &arg_buf[1], js_dup(sp[-1])); BREAK;\n        \
              CASE(OP_set_arg2): set_value(ctx, &arg_buf[2], js_dup(sp[-1])); BREAK;\n        \
              CASE(OP_set_arg3): set_value(ctx, &arg_buf[3], js_dup(sp[-1])); BREAK;\n",
        new: "",
    },
    Edit {
        file: C,
        why: "(and their emitting)",
        old: "        case OP_set_arg:\n            dbuf_putc(bc_out, OP_set_arg0 + idx);\n            \
              return;\n",
        new: "",
    },
    Edit {
        file: C,
        why: "push_i32(k) then a binary op become binop_k",
        old: "                val = (val != 0);\n                goto has_constant_test;\n            }\n            \
              add_pc2line_info(s, bc_out.size, line_num, col_num);\n            \
              push_short_int(&bc_out, val);\n            break;\n",
        new: "                val = (val != 0);\n                goto has_constant_test;\n            }\n            \
              /* wasbox: push_i32(k) op -> binop_k(op, k) for an int16 k */\n            \
              if (val == (int16_t)val &&\n                \
              (code_match(&cc, pos_next, M4(OP_add, OP_sub, OP_mul, OP_div), -1) ||\n                 \
              code_match(&cc, pos_next, M4(OP_mod, OP_and, OP_or, OP_xor), -1) ||\n                 \
              code_match(&cc, pos_next, M4(OP_shl, OP_sar, OP_shr, OP_lt), -1) ||\n                 \
              code_match(&cc, pos_next, M4(OP_lte, OP_gt, OP_gte, OP_eq), -1) ||\n                 \
              code_match(&cc, pos_next, M3(OP_neq, OP_strict_eq, OP_strict_neq), -1))) {\n                \
              if (cc.line_num >= 0) line_num = cc.line_num;\n                \
              if (cc.col_num >= 0) col_num = cc.col_num;\n                \
              add_pc2line_info(s, bc_out.size, line_num, col_num);\n                \
              dbuf_putc(&bc_out, OP_binop_k);\n                \
              dbuf_putc(&bc_out, cc.op);\n                \
              dbuf_put_u16(&bc_out, val);\n                \
              dbuf_putc(&bc_out, 0);\n                \
              pos_next = cc.pos;\n                \
              break;\n            }\n            \
              add_pc2line_info(s, bc_out.size, line_num, col_num);\n            \
              push_short_int(&bc_out, val);\n            break;\n",
    },
    Edit {
        file: C,
        why: "the interpreter's binop_k",
        old: "        CASE(OP_add_loc):\n",
        new: BINOP_K_OP,
    },
    Edit {
        file: C,
        why: "Node.js's (V8's) message for a property read of null or undefined",
        old: "        case JS_TAG_NULL:\n            \
              return JS_ThrowTypeErrorAtom(ctx, \"cannot read property '%s' of null\", prop);\n        \
              case JS_TAG_UNDEFINED:\n            \
              return JS_ThrowTypeErrorAtom(ctx, \"cannot read property '%s' of undefined\", prop);\n",
        new: "        case JS_TAG_NULL:\n            \
              return JS_ThrowTypeErrorAtom(ctx, \"Cannot read properties of null (reading '%s')\", prop);\n        \
              case JS_TAG_UNDEFINED:\n            \
              return JS_ThrowTypeErrorAtom(ctx, \"Cannot read properties of undefined (reading '%s')\", prop);\n",
    },
    Edit {
        file: C,
        why: "(the same for a computed property: `u[0]`)",
        old: "        if (tag == JS_TAG_NULL) {\n            \
              JS_ThrowTypeErrorAtom(ctx, \"cannot read property '%s' of null\", atom);\n        \
              } else {\n            \
              JS_ThrowTypeErrorAtom(ctx, \"cannot read property '%s' of undefined\", atom);\n",
        new: "        if (tag == JS_TAG_NULL) {\n            \
              JS_ThrowTypeErrorAtom(ctx, \"Cannot read properties of null (reading '%s')\", atom);\n        \
              } else {\n            \
              JS_ThrowTypeErrorAtom(ctx, \"Cannot read properties of undefined (reading '%s')\", atom);\n",
    },
    Edit {
        file: C,
        why: "and for a property write",
        old: "        JS_ThrowTypeErrorAtom(ctx, \"cannot set property '%s' of null\", prop);\n        \
              goto fail;\n    case JS_TAG_UNDEFINED:\n        \
              JS_ThrowTypeErrorAtom(ctx, \"cannot set property '%s' of undefined\", prop);\n",
        new: "        JS_ThrowTypeErrorAtom(ctx, \"Cannot set properties of null (setting '%s')\", prop);\n        \
              goto fail;\n    case JS_TAG_UNDEFINED:\n        \
              JS_ThrowTypeErrorAtom(ctx, \"Cannot set properties of undefined (setting '%s')\", prop);\n",
    },
    Edit {
        file: C,
        why: "Node.js's message for an assignment to a const",
        old: "                if (type == JS_THROW_VAR_RO)\n                    \
              JS_ThrowTypeErrorReadOnly(ctx, JS_PROP_THROW, atom);\n",
        new: "                if (type == JS_THROW_VAR_RO)\n                    \
              JS_ThrowTypeError(ctx, \"Assignment to constant variable.\");\n",
    },
    Edit {
        file: C,
        why: "Node.js's message for reduce of an empty array",
        old: "                JS_ThrowTypeError(ctx, \"empty array\");\n",
        new: "                JS_ThrowTypeError(ctx, \"Reduce of empty array with no initial value\");\n",
    },
    Edit {
        file: C,
        why: "Node.js's message for a bad array length (`new Array(-1)`, `a.length = -1`)",
        old: "                if (len1 != len) {\n                fail:\n                    \
              JS_ThrowRangeError(ctx, \"invalid array length\");\n",
        new: "                if (len1 != len) {\n                fail:\n                    \
              JS_ThrowRangeError(ctx, \"Invalid array length\");\n",
    },
    Edit {
        file: C,
        why: "(and for an array made with a length)",
        old: "    if (len > INT32_MAX)\n        return JS_ThrowRangeError(ctx, \"invalid array length\");\n",
        new: "    if (len > INT32_MAX)\n        return JS_ThrowRangeError(ctx, \"Invalid array length\");\n",
    },
    Edit {
        file: C,
        why: "Node.js's messages for a bad repeat count",
        old: "    if (val < 0 || val > 2147483647) {\n        \
              JS_ThrowRangeError(ctx, \"invalid repeat count\");\n        goto fail;\n    }\n",
        new: "    if (val < 0 || val > 2147483647) {\n        \
              /* wasbox: as V8 words them */\n        \
              if (val >= 0 && val != INT64_MAX) {\n            \
              JS_ThrowRangeError(ctx, \"Invalid string length\");\n        \
              } else {\n            \
              const char *count = JS_ToCString(ctx, argv[0]);\n            \
              if (count) {\n                \
              JS_ThrowRangeError(ctx, \"Invalid count value: %s\", count);\n                \
              JS_FreeCString(ctx, count);\n            \
              }\n        \
              }\n        goto fail;\n    }\n",
    },
    Edit {
        file: C,
        why: "\"x is not a function\" and \"x is not a constructor\" name what was called, as \
              Node.js does (the helper)",
        old: "static void json_free_token(JSParseState *s, JSToken *token) {",
        new: CALLEE_NAME,
    },
    Edit {
        file: C,
        why: "(declared before the throwers; it needs opcode_info, defined later)",
        old: "static JSValue JS_ThrowTypeErrorNotAConstructor(JSContext *ctx,\n",
        new: "/* wasbox: see wb_callee_name */\n\
              #define WB_CALLEE_NAME_MAX 96\n\
              static bool wb_callee_name(JSContext *ctx, JSValueConst value, bool ctor,\n\
              \x20                          char *buf, size_t size);\n\
              static JSValue wb_throw_not_a_function(JSContext *ctx, JSValueConst func_obj);\n\n\
              static JSValue JS_ThrowTypeErrorNotAConstructor(JSContext *ctx,\n",
    },
    Edit {
        file: C,
        why: "(not a constructor)",
        old: "    return JS_ThrowTypeErrorAtom(ctx, \"%s is not a constructor\", name);\n\
              fini:\n    return JS_ThrowTypeError(ctx, \"not a constructor\");\n",
        new: "    return JS_ThrowTypeErrorAtom(ctx, \"%s is not a constructor\", name);\n\
              fini:\n    {\n        \
              char callee[WB_CALLEE_NAME_MAX];\n        \
              if (wb_callee_name(ctx, func_obj, true, callee, sizeof(callee)))\n            \
              return JS_ThrowTypeError(ctx, \"%s is not a constructor\", callee);\n    }\n    \
              return JS_ThrowTypeError(ctx, \"not a constructor\");\n",
    },
    Edit {
        file: C,
        why: "`new x()` of a value that is not an object says \"x is not a constructor\", as \
              Node.js does (not \"not a function\")",
        old: "    flags |= JS_CALL_FLAG_CONSTRUCTOR;\n    \
              if (unlikely(JS_VALUE_GET_TAG(func_obj) != JS_TAG_OBJECT))\n        \
              goto not_a_function;\n",
        new: "    flags |= JS_CALL_FLAG_CONSTRUCTOR;\n    \
              if (unlikely(JS_VALUE_GET_TAG(func_obj) != JS_TAG_OBJECT))\n        \
              return JS_ThrowTypeErrorNotAConstructor(ctx, func_obj);\n",
    },
    Edit {
        file: C,
        why: "(its label is no longer jumped to)",
        old: "        if (!call_func) {\n        not_a_function:\n            \
              return JS_ThrowTypeErrorNotAFunction(ctx);\n",
        new: "        if (!call_func) {\n            \
              return JS_ThrowTypeErrorNotAFunction(ctx);\n",
    },
    Edit {
        file: C,
        why: "(not a function: a call op of the interpreter whose callee is not callable)",
        old: "        if (!call_func) {\n        not_a_function:\n            \
              return JS_ThrowTypeErrorNotAFunction(caller_ctx);\n",
        new: "        if (!call_func) {\n        not_a_function:\n            \
              return wb_throw_not_a_function(caller_ctx, func_obj);\n",
    },
    Edit {
        file: C,
        why: "bytecode with wasbox's ops is not another QuickJS's",
        old: "#define BC_VERSION 28\n",
        new: "/* wasbox: its bytecode has ops of its own (get_loc_field, get_arg_field,\n   \
              push_this_field, object_shape) */\n\
              #define BC_VERSION (0x80 | 28)\n",
    },
    Edit {
        file: C,
        why: "the interpreter's push_this_field, get_loc_field and get_arg_field",
        old: "        CASE(OP_get_field2):\n            {\n                JSValue val, obj;\n",
        new: r#"        CASE(OP_push_this_field):
        CASE(OP_get_loc_field):
        CASE(OP_get_arg_field):
            {
                /* wasbox: get_loc/get_arg then get_field. The variable holds
                   the object while its own properties and its prototypes'
                   are looked at; anything that can run code (a getter, a
                   proxy) gets a reference of its own. */
                JSValue val, obj;
                JSAtom atom;
                JSObject *p;
                JSProperty *pr;
                JSShapeProperty *prs;
                uint8_t *hint;
                uint32_t h;

                atom = get_u32(pc);
                if (opcode == OP_push_this_field) {
                    obj = this_obj;
                    hint = (uint8_t *)pc + 4;
                    pc += 5;
                } else {
                    obj = opcode == OP_get_loc_field ? var_buf[pc[4]] : arg_buf[pc[4]];
                    hint = (uint8_t *)pc + 5;
                    pc += 6;
                }
                if (likely(JS_VALUE_GET_TAG(obj) == JS_TAG_OBJECT)) {
                    p = JS_VALUE_GET_OBJ(obj);
                    /* where the property was last found: it is there when the
                       object's shape has it at that index (names are unique in
                       a shape, deleted entries have none) */
                    h = *hint;
                    if (likely(h < p->shape->prop_count)) {
                        prs = &get_shape_prop(p->shape)[h];
                        if (likely(prs->atom == atom && !(prs->flags & JS_PROP_TMASK))) {
                            *sp++ = js_dup(p->prop[h].u.value);
                            BREAK;
                        }
                    }
                    prs = find_own_property(&pr, p, atom);
                    if (prs && (h = pr - p->prop) < 256)
                        *hint = h;
                    for(;;) {
                        if (prs) {
                            if (unlikely(prs->flags & JS_PROP_TMASK))
                                goto get_var_field_slow_path;
                            val = js_dup(pr->u.value);
                            break;
                        }
                        if (unlikely(p->is_exotic))
                            goto get_var_field_slow_path;
                        p = p->shape->proto;
                        if (!p) {
                            val = JS_UNDEFINED;
                            break;
                        }
                        prs = find_own_property(&pr, p, atom);
                    }
                } else {
                get_var_field_slow_path:
                    sf->cur_pc = pc;
                    obj = js_dup(obj);
                    val = JS_GetPropertyInternal(ctx, obj, atom, obj, false);
                    JS_FreeValue(ctx, obj);
                    if (unlikely(JS_IsException(val)))
                        goto exception;
                }
                *sp++ = val;
            }
            BREAK;

        CASE(OP_get_field2):
            {
                JSValue val, obj;
"#,
    },
    Edit {
        file: C,
        why: "get_loc then get_field become get_loc_field",
        old: "                /* transformation: get_loc(0) get_loc(1) -> get_loc0_loc1 */",
        new: r#"                /* wasbox: get_loc(n) get_field(x) -> get_loc_field(x, n) */
                if (idx < 256 &&
                    wb_fuse_field(s, &cc, &bc_out, pos_next, OP_get_loc_field,
                                  idx, &line_num, &col_num)) {
                    pos_next = cc.pos;
                    break;
                }
                /* transformation: get_loc(0) get_loc(1) -> get_loc0_loc1 */"#,
    },
    Edit {
        file: C,
        why: "get_arg then get_field become get_arg_field",
        old: "        case OP_get_arg:\n        case OP_get_var_ref:\n            {\n                \
              int idx;\n                idx = get_u16(bc_buf + pos + 1);\n",
        new: r#"        case OP_get_arg:
        case OP_get_var_ref:
            {
                int idx;
                idx = get_u16(bc_buf + pos + 1);
                /* wasbox: get_arg(n) get_field(x) -> get_arg_field(x, n) */
                if (op == OP_get_arg && idx < 256 &&
                    wb_fuse_field(s, &cc, &bc_out, pos_next, OP_get_arg_field,
                                  idx, &line_num, &col_num)) {
                    pos_next = cc.pos;
                    break;
                }
"#,
    },
    Edit {
        file: C,
        why: "a function whose `this` is read directly sets no `this` variable",
        old: "    if (s->this_var_idx >= 0) {\n        if (s->is_derived_class_constructor) {",
        new: "    if (s->this_var_idx >= 0 && s->this_var_idx != this_direct) {\n        \
              if (s->is_derived_class_constructor) {",
    },
    Edit {
        file: C,
        why: "and reads it as push_this, or push_this_field for this.x",
        old: "                int idx;\n                idx = get_u16(bc_buf + pos + 1);\n                \
              if (idx >= 256)\n                    goto no_change;",
        new: r#"                int idx;
                idx = get_u16(bc_buf + pos + 1);
                /* wasbox: see wb_this_direct */
                if (idx == this_direct) {
                    if (wb_fuse_field(s, &cc, &bc_out, pos_next, OP_push_this_field,
                                      idx, &line_num, &col_num)) {
                        pos_next = cc.pos;
                        break;
                    }
                    add_pc2line_info(s, bc_out.size, line_num, col_num);
                    dbuf_putc(&bc_out, OP_push_this);
                    break;
                }
                if (idx >= 256)
                    goto no_change;"#,
    },
];

/// Makes `dir` (`target/quickjs/rquickjs-sys`, where `guest-components/Cargo.toml`'s
/// `[patch.crates-io]` looks) the changed crate, unless it already is: a file in it records a
/// digest of the edits it was made with.
pub(crate) fn patched(dir: &Path) {
    let mut digest = sha2::Sha256::new();
    digest.update(SHA256);
    for e in EDITS {
        for part in [e.file, e.old, e.new] {
            digest.update(part);
            digest.update([0]);
        }
    }
    let stamp = hex(&digest.finalize());
    let stamp_file = dir.join(".wasbox-edits");
    if std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return;
    }
    let parent = dir.parent().unwrap();
    std::fs::create_dir_all(parent)
        .unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
    let upstream = fetch(parent);
    let tmp = parent.join(format!("{CRATE}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    copy_tree(&upstream, &tmp);
    for e in EDITS {
        let path = tmp.join(e.file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
        let found = text.matches(e.old).count();
        assert!(
            found == 1,
            "QuickJS edit `{}`: its text occurs {found} times in {} (once expected)",
            e.why,
            path.display()
        );
        std::fs::write(&path, text.replacen(e.old, e.new, 1))
            .unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    }
    std::fs::write(tmp.join(".wasbox-edits"), stamp).expect("writing the QuickJS stamp");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir)
        .unwrap_or_else(|e| panic!("renaming {} into place: {e}", tmp.display()));
}

/// Has cargo fetch the crate from crates.io (a manifest of one dependency, under `work`),
/// checks the SHA-256 of what it downloaded and returns its unpacked source.
fn fetch(work: &Path) -> PathBuf {
    let dir = work.join("fetch");
    std::fs::create_dir_all(dir.join("src")).expect("creating the QuickJS fetch manifest");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"wasbox-quickjs-fetch\"\nversion = \"0.0.0\"\n\
             edition = \"2021\"\npublish = false\n\n[dependencies]\n\
             {CRATE} = {{ version = \"={VERSION}\", default-features = false }}\n\n[workspace]\n"
        ),
    )
    .expect("writing the QuickJS fetch manifest");
    std::fs::write(dir.join("src/lib.rs"), "").expect("writing the QuickJS fetch manifest");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&dir);
    super::clear_outer_build_env(&mut cmd, false);
    let source = super::package_source(cmd, CRATE, Some(VERSION));
    // registry/src/<index>/<crate>-<version> was unpacked from registry/cache/<index>/<crate>-<version>.crate.
    let index = source.parent().unwrap();
    let archive = index
        .parent()
        .and_then(Path::parent)
        .map(|registry| {
            registry
                .join("cache")
                .join(index.file_name().unwrap())
                .join(format!("{CRATE}-{VERSION}.crate"))
        })
        .unwrap();
    let bytes =
        std::fs::read(&archive).unwrap_or_else(|e| panic!("reading {}: {e}", archive.display()));
    let sum = hex(&sha2::Sha256::digest(&bytes));
    assert_eq!(
        sum,
        SHA256,
        "{} is not the {CRATE} {VERSION} wasbox was written for",
        archive.display()
    );
    source
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("creating {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("reading a directory");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copying {}: {e}", entry.path().display()));
        }
    }
}
