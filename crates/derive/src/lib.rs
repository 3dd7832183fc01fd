//! rlgrad-derive: `#[derive(Module)]` for `rlgrad-autodiff`, re-exported there as
//! `rlgrad_autodiff::nn::Module` (and `rlgrad_autodiff::Module`) beside the trait, so a
//! user depends on `rlgrad-autodiff` alone; and `#[derive(State)]` for
//! `rlgrad-checkpoint` (its feature `derive`, re-exported as `rlgrad_checkpoint::State`):
//! a whole agent saved and restored in one call, documented with the trait.
//!
//! For a struct whose fields are modules (layers, `Param`s, and `Vec`s, `Option`s and
//! `Box`es of modules), the derive writes `Module::visit` and `visit_mut` (the fields in
//! declaration order) and `visit_named`/`visit_named_mut` (each field under its name:
//! `l1/weight`; tuple fields under their index). Every other method of the trait
//! (`parameters`, `named_parameters`, `name_by_path`, `soft_update_from`, ...) follows.
//! `#[module(skip)]` leaves out a field that is not a module (a step counter, a config).
//!
//! ```
//! use rlgrad_autodiff::nn::{Init, Linear, Module};
//! use rlgrad_core::Rng;
//!
//! #[derive(Module, Clone)]
//! struct Actor {
//!     layers: Vec<Linear>,
//!     #[module(skip)]
//!     max_action: f32,
//! }
//!
//! let mut rng = Rng::new(0, "init");
//! let actor = Actor {
//!     layers: vec![Linear::new("l1", 3, 8, Init::TorchDefault, &mut rng)?,
//!                  Linear::new("l2", 8, 1, Init::TorchDefault, &mut rng)?],
//!     max_action: 2.0,
//! };
//! assert_eq!(actor.named_parameters()[2].0, "layers/1/weight");
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! The impl is generic over the float type and device (`impl<T, D> Module<T, D>`) with a
//! bound `FieldType: Module<T, D>` per field, so a struct of `Linear<f64>`s is a
//! `Module<f64>` and a generic `struct Actor<T: Float, D: Device>` works too. The price
//! of that genericity (serde's too): a field that is not a module makes the struct no
//! module, reported where the struct is used as one (`trait bound `u64: Module<_, _>` was
//! not satisfied`), not at the field. Shapes the derive does not support are errors at
//! the derive:
//!
//! ```compile_fail
//! use rlgrad_autodiff::nn::Module;
//! #[derive(Module)]
//! enum Policy { Gaussian, Categorical } // error: `#[derive(Module)]` supports structs only
//! ```
//!
//! ```compile_fail,E0599
//! use rlgrad_autodiff::nn::{Linear, Module};
//! #[derive(Module)]
//! struct Actor {
//!     l1: Linear,
//!     steps: u64, // needs `#[module(skip)]`
//! }
//! fn count(actor: &Actor) -> usize {
//!     actor.num_parameters() // error: trait bound `u64: Module<_, _>` was not satisfied
//! }
//! ```
//!
//! ```compile_fail
//! use rlgrad_autodiff::nn::{Linear, Module};
//! #[derive(Module)]
//! struct Actor {
//!     #[module(skipp)] // error: unknown `module` attribute `skipp`; expected `skip`
//!     l1: Linear,
//! }
//! ```

#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, GenericParam, Ident, Index, parse_macro_input, parse_quote};

/// Derives `rlgrad_autodiff::nn::Module` for a struct of modules; see the crate docs.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match module_impl(&input) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// One field that is a module: how to reach it and its path segment.
struct Field {
    access: TokenStream2,
    segment: String,
    ty: syn::Type,
    span: Span,
}

/// The fields of a struct for `derive`, or an error at an enum or a union.
fn struct_fields<'i>(input: &'i DeriveInput, derive: &str) -> syn::Result<&'i syn::Fields> {
    match &input.data {
        Data::Struct(data) => Ok(&data.fields),
        Data::Enum(data) => Err(syn::Error::new(
            data.enum_token.span(),
            format_args!(
                "`#[derive({derive})]` supports structs only: what an enum holds depends on its \
                 variant, and a `{derive}` visits its parts in one fixed order; implement `{derive}` by hand \
                 or make the variants fields of a struct (`Option<T>` fields are supported)"
            ),
        )),
        Data::Union(data) => Err(syn::Error::new(
            data.union_token.span(),
            format_args!("`#[derive({derive})]` supports structs only, not unions"),
        )),
    }
}

/// How to reach field `i` (`self.#access`) and its path segment.
fn field(i: usize, field: &syn::Field) -> Field {
    let (access, segment) = match &field.ident {
        Some(ident) => (quote!(#ident), ident.to_string()),
        None => {
            let index = Index::from(i);
            (quote!(#index), i.to_string())
        }
    };
    Field {
        access,
        segment,
        ty: field.ty.clone(),
        span: field.ty.span(),
    }
}

fn module_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let mut modules = Vec::new();
    for (i, f) in struct_fields(input, "Module")?.iter().enumerate() {
        if !flags(&f.attrs, "module", &["skip"], MODULE_HINT)?.contains(&"skip") {
            modules.push(field(i, f));
        }
    }

    let krate = quote!(::rlgrad_autodiff);
    let (float, device) = (format_ident!("__RlgradT"), format_ident!("__RlgradD"));
    let mut generics = input.generics.clone();
    generics
        .params
        .push(GenericParam::Type(parse_quote!(#float: #krate::Float)));
    generics
        .params
        .push(GenericParam::Type(parse_quote!(#device: #krate::Device)));
    let where_clause = generics.make_where_clause();
    for field in &modules {
        // `FieldType: Module<T, D>`, spanned at the field so that an error points at it.
        let ty = &field.ty;
        let bound = quote_spanned!(field.span=> #ty: #krate::nn::Module<#float, #device>);
        where_clause.predicates.push(syn::parse2(bound)?);
    }
    let (impl_generics, _, where_clause) = generics.split_for_impl();
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let name = &input.ident;
    let param = quote!(#krate::Param<#float, #device>);
    let module = quote!(#krate::nn::Module<#float, #device>);

    let visit = modules.iter().map(|f| {
        let (access, ty) = (&f.access, &f.ty);
        quote_spanned!(f.span=> <#ty as #module>::visit(&self.#access, f);)
    });
    let visit_mut = modules.iter().map(|f| {
        let (access, ty) = (&f.access, &f.ty);
        quote_spanned!(f.span=> <#ty as #module>::visit_mut(&mut self.#access, f);)
    });
    let visit_named = modules.iter().map(|f| {
        let (access, ty, segment) = (&f.access, &f.ty, &f.segment);
        quote_spanned!(f.span=> <#ty as #module>::visit_named(
            &self.#access, &#krate::nn::child_path(prefix, #segment), f);)
    });
    let visit_named_mut = modules.iter().map(|f| {
        let (access, ty, segment) = (&f.access, &f.ty, &f.segment);
        quote_spanned!(f.span=> <#ty as #module>::visit_named_mut(
            &mut self.#access, &#krate::nn::child_path(prefix, #segment), f);)
    });
    // Unused arguments when there is no module field.
    let quiet = quote!(let _ = (&f, &prefix););
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #module for #name #ty_generics #where_clause {
            fn visit<'__a>(&'__a self, f: &mut dyn FnMut(&'__a #param)) {
                let _ = &f;
                #(#visit)*
            }
            fn visit_mut<'__a>(&'__a mut self, f: &mut dyn FnMut(&'__a mut #param)) {
                let _ = &f;
                #(#visit_mut)*
            }
            fn visit_named<'__a>(&'__a self, prefix: &str, f: &mut dyn FnMut(&str, &'__a #param)) {
                #quiet
                #(#visit_named)*
            }
            fn visit_named_mut<'__a>(
                &'__a mut self,
                prefix: &str,
                f: &mut dyn FnMut(&str, &'__a mut #param),
            ) {
                #quiet
                #(#visit_named_mut)*
            }
        }
    })
}

const MODULE_HINT: &str = "`#[module(skip)]` leaves out a field that is not a module";
const STATE_HINT: &str = "`#[state(skip)]` leaves out a field that is configuration, not state; \
     `#[state(module)]` stores an autodiff module's parameters by path; `#[state(resize)]` \
     restores a `Vec` at the stored length";

/// The flags of the field's `#[attribute(...)]`s, each one of `allowed`; an error naming
/// the attribute for anything else.
fn flags(
    attrs: &[syn::Attribute],
    attribute: &str,
    allowed: &[&'static str],
    hint: &str,
) -> syn::Result<Vec<&'static str>> {
    let mut found = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident(attribute)) {
        attr.parse_nested_meta(|meta| {
            match allowed.iter().find(|flag| meta.path.is_ident(flag)) {
                Some(flag) => {
                    found.push(*flag);
                    Ok(())
                }
                None => {
                    let name = meta
                        .path
                        .get_ident()
                        .map_or_else(|| "a path".to_owned(), Ident::to_string);
                    let expected = allowed
                        .iter()
                        .map(|flag| format!("`{flag}`"))
                        .collect::<Vec<_>>()
                        .join(" or ");
                    Err(meta.error(format_args!(
                        "unknown `{attribute}` attribute `{name}`; expected {expected} ({hint})"
                    )))
                }
            }
        })?;
    }
    Ok(found)
}

/// Derives `rlgrad_checkpoint::State` for a struct of states; see `rlgrad_checkpoint::State`.
///
/// Each field is saved under `prefix/field` (tuple fields under their index) through its
/// own `State` impl; `#[state(module)]` saves an autodiff module's parameters by path
/// (`Checkpoint::put_module` with the field's path as the prefix, feature `autodiff` of
/// rlgrad-checkpoint);
/// `#[state(resize)]` restores a `Vec` at the stored length (`restore_resized`);
/// `#[state(skip)]` leaves a field out (configuration, scratch tapes).
#[proc_macro_derive(State, attributes(state))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match state_impl(&input) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

fn state_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let krate = quote!(::rlgrad_checkpoint);
    let mut generics = input.generics.clone();
    let where_clause = generics.make_where_clause();
    let (mut saves, mut restores) = (Vec::new(), Vec::new());
    for (i, f) in struct_fields(input, "State")?.iter().enumerate() {
        let flags = flags(&f.attrs, "state", &["skip", "module", "resize"], STATE_HINT)?;
        if flags.len() > 1 {
            return Err(syn::Error::new(
                f.span(),
                format_args!(
                    "`#[state(...)]` takes one of `skip`, `module` and `resize` per field, \
                     not {flags:?}"
                ),
            ));
        }
        if flags.contains(&"skip") {
            continue;
        }
        let Field {
            access,
            segment,
            ty,
            span,
        } = field(i, f);
        let path = quote!(&#krate::state_path(prefix, #segment));
        if flags.contains(&"module") {
            saves.push(quote_spanned!(span=> checkpoint.put_module(#path, &self.#access)?;));
            restores.push(quote_spanned!(span=> plan.module(#path, &mut self.#access);));
        } else {
            // `FieldType: State`, spanned at the field so that an error points at it.
            let bound = quote_spanned!(span=> #ty: #krate::State);
            where_clause.predicates.push(syn::parse2(bound)?);
            saves.push(quote_spanned!(span=>
                <#ty as #krate::State>::save_state(&self.#access, #path, checkpoint)?;));
            restores.push(if flags.contains(&"resize") {
                quote_spanned!(span=>
                    #krate::restore_resized(&mut self.#access, #path, checkpoint, plan)?;)
            } else {
                quote_spanned!(span=>
                    <#ty as #krate::State>::restore_state(&mut self.#access, #path, checkpoint, plan)?;)
            });
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let name = &input.ident;
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #krate::State for #name #ty_generics #where_clause {
            fn save_state(
                &self,
                prefix: &str,
                checkpoint: &mut #krate::Checkpoint,
            ) -> #krate::Result<()> {
                let _ = (&prefix, &checkpoint);
                #(#saves)*
                Ok(())
            }
            fn restore_state<'__a>(
                &'__a mut self,
                prefix: &str,
                checkpoint: &#krate::Checkpoint,
                plan: &mut #krate::Restore<'__a>,
            ) -> #krate::Result<()> {
                let _ = (&prefix, &checkpoint, &plan);
                #(#restores)*
                Ok(())
            }
        }
    })
}

/// The README's example, compiled and run as a doctest so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctests {}
