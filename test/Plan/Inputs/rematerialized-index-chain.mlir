// An index computation whose every op reads its predecessor twice (60
// squarings of an iota): a DAG whose paths double per op. Rebuilt in the
// one kernel that reads it, visited once per op (rematerialized-index.test).
func.func @main(%x: tensor<8x16xi64> {cleave.name = "x"}) -> (tensor<8x16xi64> {cleave.name = "y"}) {
  %v0 = cleave.iota dim = 1 : tensor<8x16xi64>
  %v1 = cleave.binary mul %v0, %v0 : tensor<8x16xi64>
  %v2 = cleave.binary mul %v1, %v1 : tensor<8x16xi64>
  %v3 = cleave.binary mul %v2, %v2 : tensor<8x16xi64>
  %v4 = cleave.binary mul %v3, %v3 : tensor<8x16xi64>
  %v5 = cleave.binary mul %v4, %v4 : tensor<8x16xi64>
  %v6 = cleave.binary mul %v5, %v5 : tensor<8x16xi64>
  %v7 = cleave.binary mul %v6, %v6 : tensor<8x16xi64>
  %v8 = cleave.binary mul %v7, %v7 : tensor<8x16xi64>
  %v9 = cleave.binary mul %v8, %v8 : tensor<8x16xi64>
  %v10 = cleave.binary mul %v9, %v9 : tensor<8x16xi64>
  %v11 = cleave.binary mul %v10, %v10 : tensor<8x16xi64>
  %v12 = cleave.binary mul %v11, %v11 : tensor<8x16xi64>
  %v13 = cleave.binary mul %v12, %v12 : tensor<8x16xi64>
  %v14 = cleave.binary mul %v13, %v13 : tensor<8x16xi64>
  %v15 = cleave.binary mul %v14, %v14 : tensor<8x16xi64>
  %v16 = cleave.binary mul %v15, %v15 : tensor<8x16xi64>
  %v17 = cleave.binary mul %v16, %v16 : tensor<8x16xi64>
  %v18 = cleave.binary mul %v17, %v17 : tensor<8x16xi64>
  %v19 = cleave.binary mul %v18, %v18 : tensor<8x16xi64>
  %v20 = cleave.binary mul %v19, %v19 : tensor<8x16xi64>
  %v21 = cleave.binary mul %v20, %v20 : tensor<8x16xi64>
  %v22 = cleave.binary mul %v21, %v21 : tensor<8x16xi64>
  %v23 = cleave.binary mul %v22, %v22 : tensor<8x16xi64>
  %v24 = cleave.binary mul %v23, %v23 : tensor<8x16xi64>
  %v25 = cleave.binary mul %v24, %v24 : tensor<8x16xi64>
  %v26 = cleave.binary mul %v25, %v25 : tensor<8x16xi64>
  %v27 = cleave.binary mul %v26, %v26 : tensor<8x16xi64>
  %v28 = cleave.binary mul %v27, %v27 : tensor<8x16xi64>
  %v29 = cleave.binary mul %v28, %v28 : tensor<8x16xi64>
  %v30 = cleave.binary mul %v29, %v29 : tensor<8x16xi64>
  %v31 = cleave.binary mul %v30, %v30 : tensor<8x16xi64>
  %v32 = cleave.binary mul %v31, %v31 : tensor<8x16xi64>
  %v33 = cleave.binary mul %v32, %v32 : tensor<8x16xi64>
  %v34 = cleave.binary mul %v33, %v33 : tensor<8x16xi64>
  %v35 = cleave.binary mul %v34, %v34 : tensor<8x16xi64>
  %v36 = cleave.binary mul %v35, %v35 : tensor<8x16xi64>
  %v37 = cleave.binary mul %v36, %v36 : tensor<8x16xi64>
  %v38 = cleave.binary mul %v37, %v37 : tensor<8x16xi64>
  %v39 = cleave.binary mul %v38, %v38 : tensor<8x16xi64>
  %v40 = cleave.binary mul %v39, %v39 : tensor<8x16xi64>
  %v41 = cleave.binary mul %v40, %v40 : tensor<8x16xi64>
  %v42 = cleave.binary mul %v41, %v41 : tensor<8x16xi64>
  %v43 = cleave.binary mul %v42, %v42 : tensor<8x16xi64>
  %v44 = cleave.binary mul %v43, %v43 : tensor<8x16xi64>
  %v45 = cleave.binary mul %v44, %v44 : tensor<8x16xi64>
  %v46 = cleave.binary mul %v45, %v45 : tensor<8x16xi64>
  %v47 = cleave.binary mul %v46, %v46 : tensor<8x16xi64>
  %v48 = cleave.binary mul %v47, %v47 : tensor<8x16xi64>
  %v49 = cleave.binary mul %v48, %v48 : tensor<8x16xi64>
  %v50 = cleave.binary mul %v49, %v49 : tensor<8x16xi64>
  %v51 = cleave.binary mul %v50, %v50 : tensor<8x16xi64>
  %v52 = cleave.binary mul %v51, %v51 : tensor<8x16xi64>
  %v53 = cleave.binary mul %v52, %v52 : tensor<8x16xi64>
  %v54 = cleave.binary mul %v53, %v53 : tensor<8x16xi64>
  %v55 = cleave.binary mul %v54, %v54 : tensor<8x16xi64>
  %v56 = cleave.binary mul %v55, %v55 : tensor<8x16xi64>
  %v57 = cleave.binary mul %v56, %v56 : tensor<8x16xi64>
  %v58 = cleave.binary mul %v57, %v57 : tensor<8x16xi64>
  %v59 = cleave.binary mul %v58, %v58 : tensor<8x16xi64>
  %v60 = cleave.binary mul %v59, %v59 : tensor<8x16xi64>
  %y = cleave.binary add %v60, %x : tensor<8x16xi64>
  return %y : tensor<8x16xi64>
}
